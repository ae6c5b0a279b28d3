//! scripts/package.sh --no-build packages the release binary under test; apt
//! installs the .deb as a user would and dpkg finds each file as the package's
//! checksums say; the installed tunbench validates a shipped topology and runs
//! a lab from /usr/bin; its man pages and completions are where man and the
//! shells look and match what the binary generates; a purge leaves none of it.
//! The package is machine-wide: a guard purges it even when the test fails,
//! and the test refuses to replace a tunbench that no package installed.

use crate::common::{LabGuard, assert_gone, lab_name, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const PACKAGE: &str = "tunbench";
const INSTALLED: &str = "/usr/bin/tunbench";
const MAN_DIR: &str = "/usr/share/man/man1";
const TOPOLOGIES: &str = "/usr/share/tunbench/topologies";
/// Each shell's completion file in the package.
const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "/usr/share/bash-completion/completions/tunbench"),
    ("zsh", "/usr/share/zsh/vendor-completions/_tunbench"),
    ("fish", "/usr/share/fish/vendor_completions.d/tunbench.fish"),
];

/// Purges the package on drop, whatever happened in the test.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        if known_to_dpkg() && !purge().status.success() {
            let _ = Command::new("dpkg").args(["--purge", PACKAGE]).status();
        }
    }
}

/// Whether dpkg has the package, installed or only its configuration.
fn known_to_dpkg() -> bool {
    Command::new("dpkg-query")
        .args(["-W", PACKAGE])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn purge() -> Output {
    Command::new("apt-get")
        .args(["remove", "--purge", "-y", PACKAGE])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .expect("running apt-get remove")
}

/// The package dpkg says owns `path`, if any.
fn owner(path: &str) -> Option<String> {
    let o = Command::new("dpkg-query")
        .args(["-S", path])
        .output()
        .expect("running dpkg-query");
    let out = String::from_utf8_lossy(&o.stdout);
    o.status
        .success()
        .then(|| out.split(':').next().unwrap_or_default().trim().to_string())
}

fn installed(args: &[&str]) -> Output {
    Command::new(INSTALLED)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {INSTALLED} {args:?}: {e}"))
}

/// The .deb of the binary under test, by scripts/package.sh --no-build in
/// that binary's target directory.
fn build_package() -> PathBuf {
    let bin = Path::new(crate::common::bin());
    let target = bin
        .parent()
        .and_then(Path::parent)
        .expect("target/release/tunbench");
    let t0 = Instant::now();
    let o = Command::new("bash")
        .arg("scripts/package.sh")
        .arg("--no-build")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("running scripts/package.sh");
    assert!(
        o.status.success(),
        "scripts/package.sh failed: {}",
        text(&o)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    let size = std::fs::metadata(&deb)
        .unwrap_or_else(|e| panic!("scripts/package.sh printed {deb:?}, not a file: {e}"))
        .len();
    eprintln!(
        "package: {} ({size} bytes) in {:.1?}",
        deb.display(),
        t0.elapsed()
    );
    deb
}

/// A control field of the .deb.
fn field(deb: &Path, name: &str) -> String {
    let o = Command::new("dpkg-deb")
        .args(["-f", deb.to_str().unwrap(), name])
        .output()
        .expect("running dpkg-deb -f");
    assert!(o.status.success(), "dpkg-deb -f {name}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A version as numbers: "2.34" as [2, 34].
fn numbers(v: &str) -> Vec<u32> {
    v.split('.').map(|n| n.parse().unwrap_or(0)).collect()
}

/// The newest GLIBC_ symbol version `binary` needs, from its dynamic symbols.
fn newest_glibc(binary: &Path) -> Vec<u32> {
    let o = Command::new("objdump")
        .arg("-T")
        .arg(binary)
        .output()
        .expect("running objdump (binutils)");
    assert!(o.status.success(), "objdump -T: {}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .split(|c: char| c == '(' || c == ')' || c.is_whitespace())
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .map(numbers)
        .max()
        .expect("no GLIBC_ symbol versions in the binary")
}

/// Version, the runtime dependencies, and a libc6 at least as new as the
/// binary's symbols need (Depends is written by hand, without dpkg-shlibdeps).
fn check_control(deb: &Path) {
    assert_eq!(field(deb, "Package"), PACKAGE);
    assert_eq!(
        field(deb, "Version"),
        format!("{}-1", env!("CARGO_PKG_VERSION"))
    );
    let depends = field(deb, "Depends");
    for needed in ["iproute2", "nftables"] {
        assert!(
            depends.split(", ").any(|d| d == needed),
            "Depends: {depends}"
        );
    }
    let libc = depends
        .split(", ")
        .find_map(|d| d.strip_prefix("libc6 (>= "))
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no libc6 (>= VERSION) in Depends: {depends}"));
    let needed = newest_glibc(Path::new(crate::common::bin()));
    assert!(
        numbers(libc) >= needed,
        "the binary uses GLIBC_{needed:?} symbols and Depends says libc6 (>= {libc}): raise it in packaging/deb/control"
    );
    let recommends = field(deb, "Recommends");
    assert!(
        recommends.contains("strongswan-charon"),
        "Recommends: {recommends}"
    );
}

fn install(deb: &Path) {
    let o = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .arg(deb)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .expect("running apt-get install");
    assert!(
        o.status.success(),
        "apt-get install {}: {}",
        deb.display(),
        text(&o)
    );
    assert_eq!(owner(INSTALLED).as_deref(), Some(PACKAGE));
}

/// Every installed file as DEBIAN/md5sums says, which scripts/package.sh
/// writes after staging (a file changed after it would show here).
fn verify_checksums() {
    let o = Command::new("dpkg")
        .args(["--verify", PACKAGE])
        .output()
        .expect("running dpkg --verify");
    assert!(
        o.status.success() && o.stdout.is_empty(),
        "dpkg --verify {PACKAGE}: {}",
        text(&o)
    );
}

/// The installed tunbench on a shipped topology: validate, up, check, down.
fn run_a_lab() {
    let o = installed(&["--version"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("tunbench {}", env!("CARGO_PKG_VERSION"))
    );
    let topology = format!("{TOPOLOGIES}/two-hosts.toml");
    let o = installed(&["validate", &topology]);
    assert!(o.status.success(), "validate {topology}: {}", text(&o));
    let lab = lab_name("deb");
    let _lab = LabGuard(lab.clone());
    let o = installed(&["up", &topology, "--name", &lab]);
    assert!(o.status.success(), "up {topology}: {}", text(&o));
    let o = installed(&["check", &lab]);
    assert!(o.status.success(), "check {lab}: {}", text(&o));
    let o = installed(&["down", &lab]);
    assert!(o.status.success(), "down {lab}: {}", text(&o));
    assert_gone(&lab);
}

/// A man page per page `tunbench manpages` writes, gzipped where man looks,
/// and each shell's completion file as `tunbench completions` prints it.
fn check_manuals_and_completions() {
    let pages = tempfile::tempdir().unwrap();
    let o = installed(&["manpages", pages.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let written = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(written.lines().count() > 15, "{written}");
    for page in written.lines().map(Path::new) {
        let name = page.file_name().unwrap().to_string_lossy();
        let gz = Path::new(MAN_DIR).join(format!("{name}.gz"));
        assert!(gz.is_file(), "{} is not installed", gz.display());
    }
    if Path::new("/usr/bin/man").exists() {
        let o = Command::new("man")
            .args(["-w", "tunbench"])
            .output()
            .unwrap();
        let found = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            found.trim(),
            format!("{MAN_DIR}/tunbench.1.gz"),
            "{}",
            text(&o)
        );
    }
    for (shell, file) in COMPLETIONS {
        let packaged = std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let o = installed(&["completions", shell]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            o.stdout == packaged,
            "{file} differs from `tunbench completions {shell}`"
        );
    }
    assert!(Path::new("/usr/share/doc/tunbench/README.md").is_file());
    assert!(Path::new("/usr/share/doc/tunbench/copyright").is_file());
}

#[test]
fn the_package_installs_runs_a_lab_and_purges_without_a_trace() {
    let t0 = Instant::now();
    if Path::new(INSTALLED).exists() && owner(INSTALLED).as_deref() != Some(PACKAGE) {
        panic!(
            "{INSTALLED} exists and the {PACKAGE} package does not own it (dpkg-query -S): \
             a tunbench installed by other means, which this test would overwrite; move it away"
        );
    }
    let deb = build_package();
    check_control(&deb);
    let _installed = Installed;
    install(&deb);
    verify_checksums();
    run_a_lab();
    check_manuals_and_completions();
    let o = purge();
    assert!(o.status.success(), "apt-get remove --purge: {}", text(&o));
    let gone = [INSTALLED, "/usr/share/man/man1/tunbench.1.gz", TOPOLOGIES]
        .into_iter()
        .chain(COMPLETIONS.map(|(_, f)| f));
    for path in gone {
        assert!(!Path::new(path).exists(), "{path} is left after the purge");
    }
    assert_eq!(owner(INSTALLED), None);
    assert!(
        !known_to_dpkg(),
        "dpkg still knows {PACKAGE} after the purge"
    );
    eprintln!("package test: {:.1?}", t0.elapsed());
}
