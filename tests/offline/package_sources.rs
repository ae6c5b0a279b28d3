//! The Debian package's sources, without building it: packaging/deb/control
//! names and describes the package as Cargo.toml does and leaves the version,
//! architecture and size to scripts/package.sh (the version is Cargo.toml's,
//! written once), the copyright file gives Cargo.toml's license, and
//! package.sh refuses an argument it does not know before building anything.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(file: &str) -> String {
    std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The first line of a field's value in a Debian control file, comments
/// dropped.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[test]
fn the_control_template_agrees_with_cargo_toml_and_leaves_the_version_to_it() {
    let control = read("packaging/deb/control");
    assert_eq!(field(&control, "Package"), Some(env!("CARGO_PKG_NAME")));
    assert_eq!(
        field(&control, "Description"),
        Some(env!("CARGO_PKG_DESCRIPTION")),
        "the Description's first line is Cargo.toml's description"
    );
    for (name, filled_in) in [
        ("Version", "@VERSION@"),
        ("Architecture", "@ARCH@"),
        ("Installed-Size", "@INSTALLED_SIZE@"),
    ] {
        assert_eq!(
            field(&control, name),
            Some(filled_in),
            "{name} is scripts/package.sh's to fill in"
        );
    }
}

#[test]
fn the_copyright_file_gives_cargo_tomls_license() {
    let copyright = read("packaging/deb/copyright");
    assert_eq!(
        field(&copyright, "License"),
        Some(env!("CARGO_PKG_LICENSE"))
    );
    assert_eq!(
        field(&copyright, "Upstream-Name"),
        Some(env!("CARGO_PKG_NAME"))
    );
}

#[test]
fn package_sh_refuses_an_argument_it_does_not_know() {
    for args in [&["--bogus"][..], &["--no-build", "--no-build"]] {
        let o = Command::new("bash")
            .arg("scripts/package.sh")
            .args(args)
            .current_dir(root())
            .output()
            .expect("running bash scripts/package.sh");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "package.sh {args:?}: {stderr}");
        assert!(
            stderr.starts_with("usage: scripts/package.sh"),
            "package.sh {args:?}: {stderr}"
        );
        assert!(o.stdout.is_empty(), "package.sh {args:?} printed a path");
    }
}
