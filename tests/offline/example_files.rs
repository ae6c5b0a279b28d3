//! What the offline checks of shipped example files share: reading one,
//! finding a checker `bash scripts/setup.sh --tests` installed, showing a
//! checker's verdict, and a deliberately broken copy to show it rejects.

use std::path::{Path, PathBuf};
use std::process::Output;

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository file `rel`, as text.
pub fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A program `bash scripts/setup.sh --tests` installs, or a failure saying so.
pub fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.is_file(),
        "{} is missing ({what}): run `bash scripts/setup.sh --tests`, which installs it",
        path.display()
    );
    path
}

/// A checker in the tests' virtualenv (target/ci-tools/venv).
pub fn venv_program(name: &str, what: &str) -> PathBuf {
    installed(root().join("target/ci-tools/venv/bin").join(name), what)
}

/// A checker's exit code and everything it printed.
pub fn shown(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The file `rel` with `from` replaced by `to`, written as `name` in `dir`;
/// `from` must be in it, so the copy really differs.
pub fn broken_copy(rel: &str, dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = read(rel);
    assert!(
        text.contains(from),
        "{rel} no longer holds {from:?}, which this test breaks"
    );
    let path = dir.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).expect("writing a broken copy");
    path
}
