//! The documentation's examples and links are checked: every ```toml block of
//! README.md, CONTRIBUTING.md, CHANGELOG.md, BENCHMARKS.md and the docs/ pages
//! goes through the same library call `tunbench validate` makes
//! (`topology::parse_str`: parse, resolve, validate, and every scenario),
//! relative links lead to files of the repository (and to headings that
//! exist), and docs/topology.md names every shipped topology. Needs no root and
//! touches no kernel state. The flags the pages name: docs_flags.rs.
//!
//! What a block is, is said by an HTML comment on the line just before it:
//! - none: a whole topology file;
//! - `<!-- fragment: BASE -->`: appended to tests/fixtures/doc-bases/BASE.toml, which
//!   holds the rest of a topology; the whole must validate;
//! - `<!-- profile: BASE -->`: a device profile file, written as profile.toml
//!   beside tests/fixtures/doc-bases/BASE.toml, which names it.
//!
//! Any other comment there, a missing base, or a base no block uses fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The examples the pages hold today: fewer means blocks were lost or no
/// longer recognised (a changed fence, say), not that they pass.
const MIN_TOML_BLOCKS: usize = 16;
const MIN_PAGES: usize = 10;
const MIN_BENCHMARK_PAGES: usize = 10;

pub(super) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bases_dir() -> PathBuf {
    root().join("tests/fixtures/doc-bases")
}

/// The markdown pages of one folder, sorted.
fn pages_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v
}

/// README.md, CONTRIBUTING.md, CHANGELOG.md, BENCHMARKS.md, every docs/*.md
/// and docs/benchmarks/*.md.
pub(super) fn pages() -> Vec<PathBuf> {
    let docs = pages_in(&root().join("docs"));
    assert!(
        docs.len() >= MIN_PAGES,
        "docs/ holds {} pages, expected at least {MIN_PAGES}: {docs:?}",
        docs.len()
    );
    let benchmarks = pages_in(&root().join("docs/benchmarks"));
    assert!(
        benchmarks.len() >= MIN_BENCHMARK_PAGES,
        "docs/benchmarks/ holds {} pages, expected at least {MIN_BENCHMARK_PAGES}",
        benchmarks.len()
    );
    let top = [
        "README.md",
        "CONTRIBUTING.md",
        "CHANGELOG.md",
        "BENCHMARKS.md",
    ]
    .map(|p| root().join(p));
    top.into_iter().chain(docs).chain(benchmarks).collect()
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

pub(super) fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Whole,
    Fragment(String),
    Profile(String),
}

#[derive(Debug)]
struct Block {
    /// e.g. `docs/wireguard.md`
    page: String,
    /// 1-based line of the block's first line of text (after the fence).
    line: usize,
    kind: Kind,
    text: String,
}

/// A fenced code block: its info string, first text line, text, and the line
/// just before its opening fence.
struct Fence {
    info: String,
    line: usize,
    text: String,
    before: Option<String>,
}

/// Fenced code blocks of a markdown page; an unclosed fence is an error.
fn fences(page: &str, text: &str) -> Result<Vec<Fence>, String> {
    let mut out = Vec::new();
    let mut open: Option<(Fence, String)> = None;
    let mut prev: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match &mut open {
            Some((f, marker)) => {
                if t.starts_with(marker.as_str()) && t.trim_start_matches('`').trim().is_empty() {
                    let (f, _) = open.take().expect("an open fence");
                    out.push(f);
                } else {
                    f.text.push_str(line);
                    f.text.push('\n');
                }
            }
            None if t.starts_with("```") => {
                let ticks = t.len() - t.trim_start_matches('`').len();
                open = Some((
                    Fence {
                        info: t[ticks..].trim().to_string(),
                        line: i + 2,
                        text: String::new(),
                        before: prev.map(str::to_string),
                    },
                    "`".repeat(ticks),
                ));
            }
            None => {}
        }
        prev = Some(line);
    }
    match open {
        Some((f, _)) => Err(format!(
            "{page}:{}: a code block is never closed",
            f.line - 1
        )),
        None => Ok(out),
    }
}

/// What the comment just before a fence says the block is.
fn kind_of(page: &str, f: &Fence) -> Result<Kind, String> {
    let Some(before) = f.before.as_deref().map(str::trim) else {
        return Ok(Kind::Whole);
    };
    let Some(inner) = before
        .strip_prefix("<!--")
        .and_then(|s| s.strip_suffix("-->"))
    else {
        return Ok(Kind::Whole);
    };
    let inner = inner.trim();
    let at = format!("{page}:{}", f.line - 2);
    let (what, base) = inner
        .split_once(':')
        .map(|(w, b)| (w.trim(), b.trim()))
        .ok_or_else(|| {
            format!("{at}: `{before}` before a code block is neither `<!-- fragment: BASE -->` nor `<!-- profile: BASE -->`")
        })?;
    if base.is_empty() || !base.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!(
            "{at}: `{before}`: BASE is the name of a file in tests/fixtures/doc-bases/, without .toml"
        ));
    }
    match what {
        "fragment" => Ok(Kind::Fragment(base.to_string())),
        "profile" => Ok(Kind::Profile(base.to_string())),
        _ => Err(format!(
            "{at}: `{before}` before a code block is neither `<!-- fragment: BASE -->` nor `<!-- profile: BASE -->`"
        )),
    }
}

/// The ```toml blocks of one page. A marker before a block that is not TOML
/// is an error too: it would check nothing.
fn toml_blocks(page: &str, text: &str) -> Result<Vec<Block>, Vec<String>> {
    let mut blocks = Vec::new();
    let mut errors = Vec::new();
    let fences = fences(page, text).map_err(|e| vec![e])?;
    for f in fences {
        match kind_of(page, &f) {
            Err(e) => errors.push(e),
            Ok(kind) if f.info == "toml" => blocks.push(Block {
                page: page.to_string(),
                line: f.line,
                kind,
                text: f.text,
            }),
            Ok(Kind::Whole) => {}
            Ok(_) => errors.push(format!(
                "{page}:{}: a fragment or profile marker before a ```{} block, which is not checked",
                f.line - 2,
                f.info
            )),
        }
    }
    if errors.is_empty() {
        Ok(blocks)
    } else {
        Err(errors)
    }
}

fn base_text(b: &Block, name: &str) -> Result<String, String> {
    let path = bases_dir().join(format!("{name}.toml"));
    std::fs::read_to_string(&path)
        .map_err(|e| format!("{}:{}: base {}: {e}", b.page, b.line, shown(&path)))
}

/// The problems of a topology text, each line placed back where it was
/// written: in the block (`page:line`) or in the base. `first_block_line` is
/// the line of the text where the block's own text starts.
fn problems(
    b: &Block,
    text: &str,
    path: &Path,
    first_block_line: usize,
    base: Option<&str>,
) -> Result<(), String> {
    match tunbench::topology::parse_str(text, path) {
        // What `validate` adds: the throughput assertions' expressions.
        Ok(t) => match tunbench::verify::problems(&t) {
            v if v.is_empty() => Ok(()),
            v => Err(format!(
                "{}:{}: the example does not validate ({:?}):\n    {}",
                b.page,
                b.line,
                b.kind,
                v.iter()
                    .map(|p| format!("{}: {}", p.at, p.message))
                    .collect::<Vec<_>>()
                    .join("\n    ")
            )),
        },
        Err(invalid) => {
            let lines: Vec<String> = invalid
                .0
                .iter()
                .map(|d| {
                    let at = if d.at.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", d.at)
                    };
                    if d.line >= first_block_line {
                        format!(
                            "{}:{}:{}: {at}{}",
                            b.page,
                            b.line + d.line - first_block_line,
                            d.column,
                            d.message
                        )
                    } else {
                        format!(
                            "tests/fixtures/doc-bases/{}.toml:{}:{}: {at}{}",
                            base.unwrap_or("?"),
                            d.line,
                            d.column,
                            d.message
                        )
                    }
                })
                .collect();
            Err(format!(
                "{}:{}: the example does not validate ({:?}):\n    {}",
                b.page,
                b.line,
                b.kind,
                lines.join("\n    ")
            ))
        }
    }
}

/// Check one block the way its kind says.
fn check(b: &Block) -> Result<(), String> {
    if b.text.trim().is_empty() {
        return Err(format!("{}:{}: an empty ```toml block", b.page, b.line));
    }
    match &b.kind {
        Kind::Whole => {
            let path = root().join(&b.page);
            problems(b, &b.text, &path, 1, None)
        }
        Kind::Fragment(base) => {
            let mut text = base_text(b, base)?;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push('\n');
            let first = text.lines().count() + 1;
            text.push_str(&b.text);
            let path = bases_dir().join(format!("{base}.toml"));
            problems(b, &text, &path, first, Some(base))
        }
        Kind::Profile(base) => {
            let text = base_text(b, base)?;
            if !text.contains("profile = \"profile.toml\"") {
                return Err(format!(
                    "tests/fixtures/doc-bases/{base}.toml: a profile base names the profile as profile = \"profile.toml\""
                ));
            }
            let dir = tempfile::tempdir().expect("a temporary directory");
            std::fs::write(dir.path().join("profile.toml"), &b.text).expect("writing profile.toml");
            let path = dir.path().join(format!("{base}.toml"));
            match tunbench::topology::parse_str(&text, &path) {
                Ok(_) => Ok(()),
                Err(e) => Err(format!(
                    "{}:{}: the profile does not validate (as profile.toml of tests/fixtures/doc-bases/{base}.toml):\n    {}",
                    b.page,
                    b.line,
                    e.to_string().replace('\n', "\n    ")
                )),
            }
        }
    }
}

fn all_blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut errors = Vec::new();
    for p in pages() {
        match toml_blocks(&shown(&p), &read(&p)) {
            Ok(mut b) => blocks.append(&mut b),
            Err(mut e) => errors.append(&mut e),
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    blocks
}

#[test]
fn every_toml_example_in_the_docs_validates() {
    let blocks = all_blocks();
    assert!(
        blocks.len() >= MIN_TOML_BLOCKS,
        "found {} ```toml blocks in README.md and docs/, expected at least {MIN_TOML_BLOCKS}",
        blocks.len()
    );
    assert!(
        blocks
            .iter()
            .any(|b| b.page == "README.md" && b.kind == Kind::Whole),
        "README.md shows no whole topology"
    );
    let failures: Vec<String> = blocks.iter().filter_map(|b| check(b).err()).collect();
    let count = |f: fn(&Kind) -> bool| blocks.iter().filter(|b| f(&b.kind)).count();
    eprintln!(
        "checked {} blocks: {} whole, {} fragments, {} profiles",
        blocks.len(),
        count(|k| *k == Kind::Whole),
        count(|k| matches!(k, Kind::Fragment(_))),
        count(|k| matches!(k, Kind::Profile(_)))
    );
    assert!(
        failures.is_empty(),
        "{} of {} examples fail:\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n")
    );
}

/// A base no example uses is dead weight that would drift from the pages.
#[test]
fn every_base_serves_an_example() {
    let used: BTreeSet<String> = all_blocks()
        .into_iter()
        .filter_map(|b| match b.kind {
            Kind::Whole => None,
            Kind::Fragment(n) | Kind::Profile(n) => Some(n),
        })
        .collect();
    let mut on_disk = BTreeSet::new();
    for e in std::fs::read_dir(bases_dir()).expect("reading tests/fixtures/doc-bases") {
        let p = e.expect("directory entry").path();
        assert!(
            p.extension().is_some_and(|x| x == "toml"),
            "{}: tests/fixtures/doc-bases holds only .toml bases",
            shown(&p)
        );
        on_disk.insert(p.file_stem().unwrap().to_string_lossy().into_owned());
    }
    let unused: Vec<_> = on_disk.difference(&used).collect();
    let missing: Vec<_> = used.difference(&on_disk).collect();
    assert!(unused.is_empty(), "bases no example uses: {unused:?}");
    assert!(
        missing.is_empty(),
        "bases examples name but tests/fixtures/doc-bases lacks: {missing:?}"
    );
}

/// The checker itself: broken examples of each kind must fail, so that a
/// check which silently passes everything cannot hide behind a green test.
#[test]
fn a_broken_example_fails() {
    let page = "docs/broken.md";
    let whole_ok = "```toml\nname = \"x\"\n[nodes.a]\nkind = \"host\"\n```\n";
    let cases: &[(&str, &str)] = &[
        (
            "a misspelt key in a whole topology",
            "```toml\nname = \"x\"\n[nodes.a]\nkidn = \"host\"\n```\n",
        ),
        (
            "a misspelt key in a fragment",
            "<!-- fragment: two-ends -->\n```toml\n[tunnels.wg]\nkind = \"wireguard\"\nkeepalve = 25\npeers = [\n  { node = \"a\", endpoint = \"198.18.70.1\", address = [\"198.18.71.1/24\"] },\n  { node = \"b\", endpoint = \"198.18.70.2\", address = [\"198.18.71.2/24\"] },\n]\n```\n",
        ),
        (
            "a bad value in a fragment",
            "<!-- fragment: two-ends -->\n```toml\n[tunnels.wg]\nkind = \"wireguard\"\nmtu = 99999\npeers = [\n  { node = \"a\", endpoint = \"198.18.70.1\", address = [\"198.18.71.1/24\"] },\n  { node = \"b\", endpoint = \"198.18.70.2\", address = [\"198.18.71.2/24\"] },\n]\n```\n",
        ),
        (
            "a fragment naming a node the base lacks",
            "<!-- fragment: two-ends -->\n```toml\n[[links]]\na = \"a:eth9\"\nb = \"c:eth0\"\n```\n",
        ),
        (
            "a bare key the base's last table does not take",
            "<!-- fragment: router-isp -->\n```toml\nimpairments = { a_to_b = { dealy = \"20ms\" } }\n```\n",
        ),
        (
            "a bad value in a profile",
            "<!-- profile: router-profile -->\n```toml\nkind = \"router\"\nname = \"p\"\n[modes.fast]\nceilings = [{ direction = \"up\", aggregate = \"1M\" }]\n```\n",
        ),
        (
            "a fragment whose base does not exist",
            "<!-- fragment: no-such-base -->\n```toml\n[nodes.b]\nkind = \"host\"\n```\n",
        ),
        (
            "a fragment left unmarked",
            "```toml\n[nodes.b]\nkind = \"host\"\n```\n",
        ),
        ("an empty block", "```toml\n```\n"),
    ];
    // The well-formed one passes, so the failures below are about their flaw.
    let ok = toml_blocks(page, whole_ok).expect("blocks");
    assert_eq!(ok.len(), 1);
    check(&ok[0]).expect("a minimal whole topology validates");
    for (what, md) in cases {
        let blocks = toml_blocks(page, md).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        assert_eq!(blocks.len(), 1, "{what}: one block");
        let err = check(&blocks[0]).expect_err(what);
        assert!(
            err.contains(page) || err.contains("doc-bases"),
            "{what}: {err}"
        );
    }
    // Markers that are not understood, or that mark what is never checked.
    for md in [
        "<!-- fragmnet: two-ends -->\n```toml\n[nodes.b]\nkind = \"host\"\n```\n",
        "<!-- fragment: ../README -->\n```toml\n[nodes.b]\nkind = \"host\"\n```\n",
        "<!-- fragment: two-ends -->\n```text\n[nodes.b]\n```\n",
        "```toml\nname = \"x\"\n",
    ] {
        assert!(toml_blocks(page, md).is_err(), "accepted: {md}");
    }
}

/// A fragment's problems are reported at its line in the page.
#[test]
fn a_problem_is_placed_at_its_line_in_the_page() {
    let md = "# t\n\n<!-- fragment: two-ends -->\n```toml\n[nodes.c]\nkind = \"hots\"\n```\n";
    let blocks = toml_blocks("docs/x.md", md).expect("blocks");
    let err = check(&blocks[0]).expect_err("an unknown node kind");
    assert!(err.contains("docs/x.md:6:"), "{err}");
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Anchors of a page's headings, outside code blocks.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// `[text](target)` links of a page, outside code blocks and code spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Drop code spans, where `](` means nothing.
        let mut plain = String::new();
        for (j, part) in line.split('`').enumerate() {
            if j % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            match after.find(')') {
                Some(end) => {
                    out.push((i + 1, after[..end].to_string()));
                    rest = &after[end..];
                }
                None => break,
            }
        }
    }
    out
}

#[test]
fn relative_links_in_the_docs_lead_to_files_and_headings() {
    let repo = root().canonicalize().expect("the repository");
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().expect("a page's folder");
        for (line, target) in links(&text) {
            let at = format!("{}:{line}: ({target})", shown(&page));
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let Ok(real) = path.canonicalize() else {
                bad.push(format!("{at}: no such file"));
                continue;
            };
            if !real.starts_with(&repo) {
                bad.push(format!("{at}: leads out of the repository"));
                continue;
            }
            if let Some(a) = anchor {
                if real.extension().is_some_and(|x| x == "md") && !anchors(&read(&real)).contains(a)
                {
                    bad.push(format!("{at}: no heading #{a} there"));
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} relative links found");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// docs/topology.md lists every shipped topology, and every `topologies/X.toml`
/// the pages mention exists (tests/lab/shipped.rs brings each of them up).
#[test]
fn the_docs_name_every_shipped_topology_and_only_those() {
    let dir = root().join("topologies");
    let listing = read(&root().join("docs/topology.md"));
    let mut shipped = Vec::new();
    for e in std::fs::read_dir(&dir).expect("reading topologies/") {
        let p = e.expect("directory entry").path();
        if p.extension().is_some_and(|x| x == "toml") {
            shipped.push(format!(
                "topologies/{}",
                p.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(shipped.len() >= 8, "topologies/ holds {shipped:?}");
    let unlisted: Vec<_> = shipped
        .iter()
        .filter(|s| !listing.contains(&format!("[{s}]")))
        .collect();
    assert!(
        unlisted.is_empty(),
        "docs/topology.md does not list {unlisted:?}"
    );
    let mut missing = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (i, _) in text.match_indices("topologies/") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/-_.".contains(*c))
                .collect();
            let name = name.trim_end_matches('.');
            if name.ends_with(".toml") && !root().join(name).is_file() {
                missing.push(format!("{}: {name}", shown(&page)));
            }
        }
    }
    assert!(missing.is_empty(), "mentioned but not shipped: {missing:?}");
}

/// The CI example runs what the README says (setup.sh, a release build,
/// `tunbench test --junit`), and tunbench still takes those flags.
#[test]
fn the_ci_workflow_example_runs_tunbench_as_documented() {
    let yml = read(&root().join("docs/ci/github-actions.yml"));
    for needle in [
        "sudo bash scripts/setup.sh",
        "cargo build --release",
        "tunbench/target/release/tunbench test net/*.toml --junit junit.xml",
        "report_paths: junit.xml",
        "if: always()",
    ] {
        assert!(
            yml.contains(needle),
            "docs/ci/github-actions.yml lacks {needle:?}"
        );
    }
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_tunbench"))
        .args(["test", "--help"])
        .output()
        .expect("tunbench test --help");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--junit"));
}
