//! Every tunbench subcommand and flag the pages (those docs.rs reads) name
//! exists in `--help`, read in-process from the clap definition
//! (`tunbench::commands::Cli`).
//!
//! The rule, so a flag of iperf3, ip, cargo or a script is never taken for
//! tunbench's:
//! - a *command* is an inline code span, or a line of a code block, that
//!   starts with `tunbench SUB` (after an optional `$ ` prompt and `sudo`;
//!   `target/release/tunbench` counts as `tunbench`); its `--flags` belong to
//!   SUB (nested, as in `tunbench gen chain`), up to a lone `--` or a shell
//!   pipe (` | `);
//! - a code span that starts with `--` belongs to the last command before it
//!   in the same paragraph, list item or table row (`tunbench run` ...
//!   `--runs`), and to nothing when there is none.
//!
//! Everything else (`iperf3 -R`, `bash scripts/setup.sh --tests`, prose) is
//! not checked.

use super::docs::{pages, read, shown};
use clap::CommandFactory;
use std::collections::BTreeSet;

/// The flags the pages name today: fewer means commands were no longer
/// recognised, not that they are right.
const MIN_FLAGS_CHECKED: usize = 100;

/// A flag a page names (None: the page names the subcommand alone) and the
/// subcommand path it is attributed to (`["gen", "chain"]`).
#[derive(Debug, Clone, PartialEq)]
struct Named {
    at: String,
    subcommand: Vec<String>,
    flag: Option<String>,
}

/// The subcommand paths after `tunbench` in `words` (several where a page
/// writes alternatives, `gen chain\|star`), and how many words they took;
/// None when the words are not tunbench and more. Where subcommands are
/// expected, a word of lower-case letters is taken for one, so `tunbench
/// doctr` is checked (and fails); a positional argument never is.
fn invocation(words: &[&str], cli: &clap::Command) -> Option<(Vec<Vec<String>>, usize)> {
    let mut i = 0;
    if words.first() == Some(&"$") {
        i += 1;
    }
    if words.get(i) == Some(&"sudo") {
        i += 1;
    }
    let exe = words.get(i)?;
    if *exe != "tunbench" && !exe.ends_with("/tunbench") {
        return None;
    }
    i += 1;
    // The program's name or path alone is not a command.
    words.get(i)?;
    let mut paths = vec![Vec::new()];
    while let Some(w) = words.get(i) {
        let alternatives: Vec<&str> = w.split('|').map(|a| a.trim_end_matches('\\')).collect();
        let expected = paths
            .iter()
            .any(|p| subcommand(cli, p).is_some_and(|c| c.has_subcommands()));
        let word = |a: &&str| !a.is_empty() && a.chars().all(|x| x.is_ascii_lowercase());
        if !expected || !alternatives.iter().all(word) {
            break;
        }
        paths = paths
            .iter()
            .flat_map(|p| {
                alternatives.iter().map(move |a| {
                    let mut p = p.clone();
                    p.push(a.to_string());
                    p
                })
            })
            .collect();
        i += 1;
    }
    Some((paths, i))
}

/// The subcommand a path names, if it exists.
fn subcommand<'a>(cli: &'a clap::Command, path: &[String]) -> Option<&'a clap::Command> {
    path.iter().try_fold(cli, |c, p| c.find_subcommand(p))
}

/// The `--flag` names among `words`, up to a lone `--` (what follows is
/// another program's) or a shell pipe. `[--a\|--b]` and `--x=1` name a and
/// b, and x.
fn flags_in(words: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for w in words {
        if *w == "--" || *w == "|" || *w == "\\|" {
            break;
        }
        for part in w.split('|') {
            let part = part.trim_start_matches(['[', '(', '\\']);
            let Some(name) = part.strip_prefix("--") else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The code spans of a paragraph of prose (`lines`, numbered), each with the
/// line it starts on; a span may run over a line break.
fn code_spans(lines: &[(usize, &str)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize, String)> = None; // (line, ticks, text)
    for (n, line) in lines {
        let mut rest = *line;
        while !rest.is_empty() {
            let Some(at) = rest.find('`') else {
                if let Some((_, _, t)) = &mut open {
                    t.push_str(rest);
                }
                break;
            };
            let ticks = rest[at..].len() - rest[at..].trim_start_matches('`').len();
            match &mut open {
                Some((_, want, t)) if *want != ticks => {
                    t.push_str(&rest[..at + ticks]);
                }
                Some(_) => {
                    let (line, _, mut t) = open.take().expect("an open span");
                    t.push_str(&rest[..at]);
                    out.push((line, t));
                }
                None => open = Some((*n, ticks, String::new())),
            }
            rest = &rest[at + ticks..];
        }
        if let Some((_, _, t)) = &mut open {
            t.push(' ');
        }
    }
    out
}

/// Whether a line of prose starts a list item or a table row, which is a
/// paragraph of its own.
fn starts_item(trimmed: &str) -> bool {
    let numbered = trimmed
        .split_once(". ")
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    ["- ", "* ", "+ ", "|"]
        .iter()
        .any(|m| trimmed.starts_with(m))
        || numbered
}

/// A page cut into paragraphs of command text, each piece with its line:
/// the code spans of a paragraph of prose (up to a blank line, a heading, a
/// code block, a list item or a table row), or one line of a code block (a
/// line ending in `\` joined with the next), which is a paragraph of its own.
fn paragraphs(text: &str) -> Vec<Vec<(usize, String)>> {
    let mut out = Vec::new();
    let mut prose: Vec<(usize, &str)> = Vec::new();
    let mut code: Option<(usize, String)> = None;
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```");
        let is_code = fenced || (line.starts_with("    ") && prose.is_empty());
        let blank = trimmed.is_empty() || trimmed.starts_with('#');
        if (blank || is_code || fence || starts_item(trimmed)) && !prose.is_empty() {
            out.push(code_spans(&prose));
            prose.clear();
        }
        if fence {
            fenced = !fenced;
        } else if is_code {
            let (n, mut joined) = code.take().unwrap_or((i + 1, String::new()));
            joined.push_str(trimmed.trim_end_matches('\\'));
            if trimmed.ends_with('\\') {
                joined.push(' ');
                code = Some((n, joined));
            } else {
                out.push(vec![(n, joined)]);
            }
        } else if !blank {
            prose.push((i + 1, line));
        }
    }
    if !prose.is_empty() {
        out.push(code_spans(&prose));
    }
    out
}

/// The flags a page names, each with the subcommand it is attributed to.
fn named_flags(page: &str, text: &str, cli: &clap::Command) -> Vec<Named> {
    let mut out = Vec::new();
    for paragraph in paragraphs(text) {
        let mut last: Option<Vec<Vec<String>>> = None;
        for (line, text) in paragraph {
            let at = format!("{page}:{line}");
            let words: Vec<&str> = text.split_whitespace().collect();
            let (paths, flags) = match invocation(&words, cli) {
                Some((paths, used)) => {
                    last = Some(paths.clone());
                    (paths, flags_in(&words[used..]))
                }
                None if text.starts_with("--") => match &last {
                    Some(paths) => (paths.clone(), flags_in(&words)),
                    None => continue,
                },
                None => continue,
            };
            // A command names its subcommand too; a span of flags only does not.
            let subcommand_named = (!text.starts_with("--")).then_some(None);
            for sub in paths {
                let named = flags.iter().map(|f| Some(f.clone()));
                for flag in subcommand_named.clone().into_iter().chain(named) {
                    out.push(Named {
                        at: at.clone(),
                        subcommand: sub.clone(),
                        flag,
                    });
                }
            }
        }
    }
    out
}

/// The long flags a command takes (`--help` always; `--version` at the top).
fn long_flags(cmd: &clap::Command, top: bool) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = cmd
        .get_arguments()
        .flat_map(|a| {
            a.get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
        })
        .map(str::to_string)
        .collect();
    out.insert("help".into());
    if top {
        out.insert("version".into());
    }
    out
}

/// What the pages name that tunbench lacks (a subcommand, or a flag of one),
/// as messages.
fn unknown(named: &[Named], cli: &clap::Command) -> Vec<String> {
    let mut out = Vec::new();
    for n in named {
        let sub = format!("tunbench {}", n.subcommand.join(" "));
        let sub = sub.trim_end();
        match (subcommand(cli, &n.subcommand), &n.flag) {
            (None, None) => out.push(format!(
                "{}: `{sub}` is no subcommand (see `tunbench --help`)",
                n.at
            )),
            (None, Some(_)) => {}
            (Some(c), Some(f)) if !long_flags(c, n.subcommand.is_empty()).contains(f) => {
                out.push(format!(
                    "{}: --{f} is not a flag of `{sub}` (see `{sub} --help`)",
                    n.at
                ))
            }
            (Some(_), _) => {}
        }
    }
    out
}

#[test]
fn every_flag_the_docs_name_exists_in_help() {
    let cli = tunbench::commands::Cli::command();
    let mut named = Vec::new();
    for p in pages() {
        named.extend(named_flags(&shown(&p), &read(&p), &cli));
    }
    let bad = unknown(&named, &cli);
    let flags = named.iter().filter(|n| n.flag.is_some()).count();
    eprintln!("checked {flags} flags the pages name");
    assert!(
        flags >= MIN_FLAGS_CHECKED,
        "found {flags} tunbench flags in the pages, expected at least {MIN_FLAGS_CHECKED}"
    );
    assert!(
        bad.is_empty(),
        "named in the pages, absent from --help:\n{}",
        bad.join("\n")
    );
}

/// The checker itself, on made-up pages: a flag no subcommand has fails, in
/// each place the rule reads; other programs' flags and prose are left alone.
#[test]
fn a_made_up_flag_fails_and_other_programs_flags_do_not() {
    let cli = tunbench::commands::Cli::command();
    let check = |md: &str| unknown(&named_flags("docs/x.md", md, &cli), &cli);
    let bad = [
        "Run `tunbench run wg.toml --no-such-flag` as root.\n",
        "```text\n$ sudo tunbench measure LAB --from a --to b --runz 3\n```\n",
        "    target/release/tunbench test net/*.toml --junitt x.xml\n",
        "`tunbench run FILE` takes `--no-such-flag` too.\n",
        "`tunbench gen chain --nodes 3 --star`\n",
        "`tunbench gen chain\\|star --node 3`\n",
        "`tunbench validate [--file-only\\|--fast]`\n",
        "`tunbench doctr` says what the kernel has\n",
        "Run `tunbench run\nwg.toml --runz 3` as root.\n",
    ];
    for md in bad {
        let found = check(md);
        assert!(!found.is_empty(), "{md:?} passed");
        assert!(
            found.iter().all(|f| f.starts_with("docs/x.md:")),
            "{found:?}"
        );
    }
    let good = [
        "`tunbench run wg.toml --runs 3 --duration 3`, `--yes` and `--format html`\n",
        "`tunbench exec LAB a -- ping --bogus 198.18.0.2`\n",
        "`iperf3 -c 198.18.0.2 --bidir` and `bash scripts/setup.sh --tests`\n",
        "its binary `target/release/tunbench`, with `--before-env X=1`\n",
        "`--no-such-flag` of a line without a tunbench command\n",
        "- `tunbench impair LAB a:eth0 --rate 1M`\n- reports: `--expect`\n",
        "```sh\ncargo build --release --locked\napt-get install --no-install-recommends x\n```\n",
        "`tunbench report r.json --format html | tee --append x`\n",
        "tunbench builds labs; `tunbench --version`\n",
    ];
    for md in good {
        assert_eq!(check(md), Vec::<String>::new(), "{md:?}");
    }
    // What the good pages name is attributed where the rule says.
    let named = named_flags("docs/x.md", good[0], &cli);
    let flags: Vec<(&str, &str)> = named
        .iter()
        .filter_map(|n| Some((n.subcommand[0].as_str(), n.flag.as_deref()?)))
        .collect();
    assert_eq!(
        flags,
        [
            ("run", "runs"),
            ("run", "duration"),
            ("run", "yes"),
            ("run", "format")
        ]
    );
}
