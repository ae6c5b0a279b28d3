//! The layering of the library, kept: every top-level module is one layer,
//! and a module may use `crate::X` only for an X of its own layer or one
//! below it. The layers up to `endpoint` are the crate tunbench-core
//! (core/src/), which the tunbench crate (src/) re-exports under the same
//! names. The order is written once, here (CONTRIBUTING.md's Layout section
//! describes the same folders). Inside the topology layer, each tunnel kind
//! is a file of its own that uses no other kind.
//!
//! Unit tests at the end of a file (`#[cfg(test)] mod tests`) and files that
//! are only compiled for tests may reach anywhere: a topology test may bring
//! a lab's keys up to check what it parsed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Lowest first. A module uses only modules at or left of its own place.
const LAYERS: &[(&str, &str)] = &[
    (
        "vocab",
        "families, protocols, directions and cells of the measurement matrix; rates and sizes as people write them; keys as text; the programs tunbench runs and their Debian packages",
    ),
    (
        "wire",
        "packet formats in the smoltcp style (IPv4, IPv6, UDP, ESP, L2TPv2/PPP, ICMP, the iperf3 UDP header, tunbench's latency probe): views, parse, emit, golden bytes",
    ),
    (
        "socket",
        "socket helpers below both the engine and the driver: buffer sizes, UDP GSO and GRO",
    ),
    (
        "codec",
        "sans-IO packet logic of every userspace datapath: the codec contract, DS-Lite (B4, AFTR with NAT44), WireGuard (boringtun), ESP, L2TP, ESP transport, per-packet overhead, the router slow path with its device model and profile types, link shapers",
    ),
    (
        "topology",
        "the topology file: raw serde structs -> resolve (defaults, names, addresses) -> validate; tunnels, scenarios, published figures, profile files (pure; the kernel's abilities are passed in)",
    ),
    (
        "routing",
        "the routing model: how the lab's kernels will forward (connected subnets, static routes, longest prefix match, switches, softwires); what `check` and reach assertions expect (pure)",
    ),
    (
        "predict",
        "the performance model: per measured cell, the device models' tightest ceiling and the links' wire limit (pure)",
    ),
    (
        "plan",
        "the kernel operations a topology needs (links, DS-Lite's seg6 and nftables, WireGuard, router slow paths) and the datapath jobs a lab runs, with their files (pure)",
    ),
    (
        "keys",
        "a lab's keys of every kind (WireGuard, ESP SAs, IKEv2 PSKs and certificates): made when it comes up, stored 0600 in its state",
    ),
    (
        "engine",
        "the iperf3-compatible measurement engine: control protocol as sans-IO state machines, thin client and server, data streams; latency probes (a sans-IO prober, the echo responder)",
    ),
    (
        "driver",
        "moving packets: TUN queues and offloads (virtio-net header, segmentation, coalescing), batched raw or UDP sockets, threads, stats, bounded logs",
    ),
    (
        "endpoint",
        "one datapath process: a codec on the driver (DS-Lite, WireGuard, ESP, L2TP, router slow path, link relay) or an external program (wireguard-go, boringtun-cli, strongSwan's charon)",
    ),
    (
        "lab",
        "a lab's life: up, down, status and liveness, impairments on a running lab, starting and supervising its datapaths and a host's part's servers",
    ),
    (
        "measure",
        "running the measurement matrix (family x protocol x direction x streams) in a lab; the UDP rate search; one host's part of a lab over several hosts",
    ),
    (
        "report",
        "text, markdown, CSV, JSON, SVG and HTML reports from results (views by question, their charts); --expect; published figures against measured ones",
    ),
    (
        "verify",
        "[[assert]] entries checked in a running lab (reach, path MTU, throughput, overhead, command) and their verdicts as lines, TAP and JUnit XML; the reach matrix of `check`; the ICMP echo prober both use",
    ),
    (
        "commands",
        "the command line: one module per subcommand, each with its arguments",
    ),
    (
        "api",
        "the Rust API for tests: a Lab that comes up under a unique name and goes down when dropped, with exec, check, measure and assert",
    ),
];

/// The highest layer of tunbench-core: everything a datapath process runs
/// and a lab is planned from, built at full optimisation on its own.
const CORE_TOP: &str = "endpoint";

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(m, _)| *m == module)
}

fn in_core(module: &str) -> bool {
    layer_of(module).is_some_and(|l| Some(l) <= layer_of(CORE_TOP))
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The two crates' source folders, relative to the repository.
const ROOTS: [&str; 2] = ["core/src", "src"];

/// Where a layer's folder (or file) sits, relative to the repository.
fn layer_path(module: &str) -> String {
    let root = if in_core(module) { ROOTS[0] } else { ROOTS[1] };
    format!("{root}/{module}")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its trailing `#[cfg(test)]` module and
/// without comment lines (a doc comment may name a higher layer).
fn non_test_code(text: &str) -> String {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `mod NAME;` items a file declares under `#[cfg(test)]` (test-only files).
fn test_only_children(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .filter_map(|w| {
            let m = w[1]
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            m.strip_prefix("mod ")?.strip_suffix(';').map(String::from)
        })
        .collect()
}

/// The top-level modules a piece of code names as `crate::X` (also inside
/// `use crate::{X, Y::z}`).
fn crate_modules(code: &str) -> Vec<String> {
    modules_after(code, "crate::")
}

/// The modules a piece of code names right after `prefix` (`crate::`,
/// `super::`, `tunnel::`), also inside `prefix{X, Y::z}`.
fn modules_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `tunbench_crate::` or similar
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

/// (file, its layer, the module it uses, that module's layer) for every use
/// of a higher layer, in both crates.
fn upward_uses() -> Vec<String> {
    ROOTS.iter().flat_map(|r| upward_uses_in(r)).collect()
}

fn upward_uses_in(root_name: &str) -> Vec<String> {
    let root = repo().join(root_name);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut test_only = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let dir = if f.file_name().unwrap() == "mod.rs" || f.file_name().unwrap() == "lib.rs" {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for child in test_only_children(&text) {
            test_only.push(dir.join(format!("{child}.rs")));
            test_only.push(dir.join(&child).join("mod.rs"));
        }
    }
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        if test_only.contains(f) || rel == Path::new("main.rs") || rel == Path::new("lib.rs") {
            continue;
        }
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = top.trim_end_matches(".rs");
        let Some(own) = layer_of(module) else {
            bad.push(format!(
                "{root_name}/{}: module {module} is in no layer of tests/architecture.rs",
                rel.display()
            ));
            continue;
        };
        if layer_path(module) != format!("{root_name}/{module}") {
            bad.push(format!(
                "{root_name}/{}: layer {module} belongs in {}",
                rel.display(),
                layer_path(module)
            ));
        }
        let text = std::fs::read_to_string(f).unwrap();
        for used in crate_modules(&non_test_code(&text)) {
            match layer_of(&used) {
                Some(l) if l > own => bad.push(format!(
                    "{root_name}/{} ({module}, layer {own}) uses crate::{used} (layer {l})",
                    rel.display()
                )),
                Some(_) => {}
                None => bad.push(format!(
                    "{root_name}/{} uses crate::{used}, which is in no layer",
                    rel.display()
                )),
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let bad = upward_uses();
    assert!(
        bad.is_empty(),
        "{} upward uses (layers, lowest first: {}):\n{}",
        bad.len(),
        LAYERS
            .iter()
            .map(|(m, _)| *m)
            .collect::<Vec<_>>()
            .join(" < "),
        bad.join("\n")
    );
}

/// The layers that only compute: what they return depends on their arguments
/// alone, never on state a caller set earlier.
const PURE: &[&str] = &[
    "vocab", "wire", "codec", "topology", "routing", "predict", "plan",
];

/// Mutable state shared across calls, as a line of code declares it.
fn declares_global_state(line: &str) -> bool {
    let l = line.trim_start();
    let shared = [
        "Mutex", "RwLock", "Atomic", "OnceLock", "OnceCell", "LazyLock", "Cell<", "RefCell",
    ];
    l.starts_with("thread_local!")
        || l.contains("static mut ")
        || (l.contains("static ") && shared.iter().any(|t| l.contains(t)))
}

#[test]
fn pure_layers_keep_no_global_state() {
    let mut bad = Vec::new();
    for layer in PURE {
        let mut files = Vec::new();
        let dir = repo().join(layer_path(layer));
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(repo().join(format!("{}.rs", layer_path(layer))));
        }
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for line in non_test_code(&text).lines() {
                if declares_global_state(line) {
                    bad.push(format!("{}: {}", f.display(), line.trim()));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "global state in a pure layer:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_checker_sees_global_state() {
    assert!(declares_global_state(
        "static PROBE: RwLock<Option<fn()>> = RwLock::new(None);"
    ));
    assert!(declares_global_state("    thread_local! {"));
    assert!(declares_global_state("static mut N: u32 = 0;"));
    assert!(!declares_global_state("static GOLDEN: [u8; 4] = [0; 4];"));
    assert!(!declares_global_state(
        "pub fn name(self) -> &'static str {"
    ));
}

/// The `pub mod NAME;` lines of a crate root, sorted.
fn declared_modules(lib: &str) -> Vec<String> {
    let lib = std::fs::read_to_string(repo().join(lib)).unwrap();
    let mut declared: Vec<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect();
    declared.sort();
    declared
}

/// The layers of one crate, sorted.
fn layers_where(core: bool) -> Vec<String> {
    let mut layers: Vec<String> = LAYERS
        .iter()
        .filter(|(m, _)| in_core(m) == core)
        .map(|(m, _)| m.to_string())
        .collect();
    layers.sort();
    layers
}

#[test]
fn every_layer_is_a_module_of_one_crate_and_the_library_shows_them_all() {
    // rustfmt sorts the `pub mod` lines, so the order is kept here, not there.
    let core = layers_where(true);
    assert_eq!(
        declared_modules("core/src/lib.rs"),
        core,
        "core/src/lib.rs declares exactly the layers up to {CORE_TOP}"
    );
    assert_eq!(
        declared_modules("src/lib.rs"),
        layers_where(false),
        "src/lib.rs declares exactly the layers above {CORE_TOP}"
    );
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    let reexport = lib
        .split("pub use tunbench_core::{")
        .nth(1)
        .and_then(|r| r.split('}').next())
        .expect("src/lib.rs re-exports tunbench_core's layers");
    let mut reexported: Vec<String> = reexport
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    reexported.sort();
    assert_eq!(reexported, core, "src/lib.rs re-exports every core layer");
}

#[test]
fn the_checker_sees_an_upward_use() {
    // The parser must find both forms, or the test above proves nothing.
    let code = "use crate::lab::Running;\n/// see crate::report\nfn f() { crate::commands::main(); }\nuse crate::{wire, measure::model};\n#[cfg(test)]\nmod tests { use crate::report::x; }\n";
    let found = crate_modules(&non_test_code(code));
    assert_eq!(found, ["lab", "commands", "wire", "measure"]);
    let mut m = BTreeMap::new();
    for name in found {
        m.insert(name.clone(), layer_of(&name).is_some());
    }
    assert!(m.values().all(|known| *known), "{m:?}");
}

/// The tunnels' folder: one file per kind, and the modules the kinds share.
/// A kind uses the shared modules and the folder's mod.rs (Tunnel,
/// TunnelKind, Datapath), never another kind; a shared module uses no kind.
const TUNNEL_DIR: &str = "core/src/topology/tunnel";
const TUNNEL_KINDS: &[&str] = &["dslite", "esp", "ikev2", "l2tp", "wireguard"];
const TUNNEL_SHARED: &[&str] = &["ends", "implementation", "keys", "overlay", "termination"];

/// The kinds a file of the tunnels' folder uses, `own` (its own) aside.
fn kinds_used(own: &str, code: &str) -> Vec<String> {
    let mut used: Vec<String> = ["super::", "tunnel::"]
        .iter()
        .flat_map(|prefix| modules_after(code, prefix))
        .filter(|m| m != own && TUNNEL_KINDS.contains(&m.as_str()))
        .collect();
    used.sort();
    used.dedup();
    used
}

/// Why a file of the tunnels' folder breaks its rule, one line each.
fn tunnel_file_problems(path: &Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_string_lossy();
    let Some(own) = name.strip_suffix(".rs") else {
        return vec![format!(
            "{TUNNEL_DIR}/{name}: a kind or a shared module is one .rs file"
        )];
    };
    if own == "mod" {
        return Vec::new(); // the tunnel itself: it names every kind
    }
    if !TUNNEL_KINDS.contains(&own) && !TUNNEL_SHARED.contains(&own) {
        return vec![format!(
            "{TUNNEL_DIR}/{name}: neither a kind nor a shared module; list it in TUNNEL_KINDS or TUNNEL_SHARED"
        )];
    }
    let code = non_test_code(&std::fs::read_to_string(path).unwrap());
    kinds_used(own, &code)
        .into_iter()
        .map(|kind| {
            format!(
                "{TUNNEL_DIR}/{name} uses the kind {kind}; what both need belongs in a shared module ({})",
                TUNNEL_SHARED.join(", ")
            )
        })
        .collect()
}

#[test]
fn no_tunnel_kind_uses_another() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo().join(TUNNEL_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let mut bad: Vec<String> = paths.iter().flat_map(|p| tunnel_file_problems(p)).collect();
    for m in TUNNEL_KINDS.iter().chain(TUNNEL_SHARED) {
        if !paths.contains(&repo().join(TUNNEL_DIR).join(format!("{m}.rs"))) {
            bad.push(format!("{TUNNEL_DIR}/{m}.rs is listed here but missing"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_checker_sees_a_kind_using_another() {
    // Every form of path must be found, or the test above proves nothing.
    let code = "use super::ends::Peer;\nuse super::{Tunnel, esp::RawEsp};\n/// like super::dslite\nfn f() { crate::topology::tunnel::wireguard::resolve(); super::l2tp::x(); }\nuse crate::topology::tunnel::{ikev2, keys};\n#[cfg(test)]\nmod tests { use super::super::dslite::x; }\n";
    let found = kinds_used("l2tp", &non_test_code(code));
    assert_eq!(found, ["esp", "ikev2", "wireguard"]);
    assert!(kinds_used("esp", "use super::esp_helper::x;").is_empty());
}

/// CONTRIBUTING.md's Layout section as it must read: one line per layer, lowest first.
fn layout_lines() -> Vec<String> {
    LAYERS
        .iter()
        .map(|(m, what)| format!("- `{}/`: {what}.", layer_path(m)))
        .collect()
}

#[test]
fn readmes_layout_lists_the_layers_in_order() {
    let readme = std::fs::read_to_string(repo().join("CONTRIBUTING.md")).unwrap();
    let layout = readme
        .split("\n## Layout\n")
        .nth(1)
        .expect("CONTRIBUTING.md has a ## Layout section");
    let layout = layout.split("\n## ").next().unwrap();
    let listed: Vec<&str> = layout
        .lines()
        .filter(|l| l.starts_with("- `src/") || l.starts_with("- `core/src/"))
        .collect();
    let want = layout_lines();
    assert_eq!(
        listed,
        want,
        "CONTRIBUTING.md's Layout section must list the layers of tests/architecture.rs; paste:\n{}",
        want.join("\n")
    );
}

/// A function a reader can hold, a file one job: the longest allowed.
const MAX_FUNCTION_LINES: usize = 120;
const MAX_FILE_LINES: usize = 800;

/// Files allowed over MAX_FILE_LINES: each is one table or one wire format.
const LONG_FILES: &[(&str, &str)] = &[(
    "core/src/wire/ipv4.rs",
    "one wire format: the IPv4 header's view, parse, emit, checksums and golden bytes",
)];

/// Every `fn` of `text` outside its trailing `#[cfg(test)]` module, with its
/// first line (1-based) and length in lines: from the `fn` line to the `}` at
/// the same indent.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let Some(name) = fn_name(code) else { continue };
        if code.ends_with(';') {
            continue; // a declaration in a trait
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
            out.push((name, i + 1, end + 2));
        }
    }
    out
}

/// The name a line declares with `fn`, after any `pub`, `const`, `async` or
/// `unsafe`.
fn fn_name(code: &str) -> Option<String> {
    let mut rest = code;
    for word in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(word).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    Some(
        rest.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect(),
    )
}

/// Every .rs file of src/, core/src/ and netns/src/ with what it holds.
fn sources() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("core/src"), &mut files);
    rust_files(&root.join("netns/src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(root).unwrap().to_path_buf(), text)
        })
        .collect()
}

#[test]
fn no_function_is_longer_than_a_reader_can_hold() {
    let mut long = Vec::new();
    for (file, text) in sources() {
        for (name, line, len) in functions(&text) {
            if len > MAX_FUNCTION_LINES {
                long.push(format!("{}:{line} {name}: {len} lines", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_file_holds_more_than_one_job() {
    let mut long = Vec::new();
    for (file, text) in sources() {
        let lines = text.lines().count();
        let allowed = LONG_FILES.iter().any(|(f, _)| file == Path::new(f));
        if lines > MAX_FILE_LINES && !allowed {
            long.push(format!("{}: {lines} lines", file.display()));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split by job, or list one table or wire format in LONG_FILES):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checker_measures_a_function() {
    let text = "fn a() {\n    x();\n}\n\nimpl T {\n    pub(crate) fn b(&self) -> u8 {\n        1\n    }\n}\n#[cfg(test)]\nmod tests {\n    fn c() {\n    }\n}\n";
    let found = functions(text);
    assert_eq!(found, [("a".to_string(), 1, 3), ("b".to_string(), 6, 3)]);
}
