//! The CI example (docs/ci/github-actions.yml) is checked offline as GitHub
//! would read it: actionlint (the workflow's syntax, expressions, the inputs of
//! the actions it uses, and its `run:` scripts through shellcheck) and the
//! GitHub workflow JSON schema that check-jsonschema ships. Deliberately broken
//! copies show that both checkers reject what they should. The checkers live
//! where `bash scripts/setup.sh --tests` puts them (target/ci-tools/venv);
//! a missing one fails the test, naming that command.

use crate::example_files::{broken_copy, installed, read, root, shown, venv_program};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WORKFLOW: &str = "docs/ci/github-actions.yml";
const CHECKER: &str = "the CI workflow's checker";

/// shellcheck on PATH: actionlint checks `run:` scripts only when it has one.
fn shellcheck() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join("shellcheck"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("shellcheck"));
    installed(
        found,
        "Debian's shellcheck, which actionlint runs on run: scripts",
    )
}

fn actionlint(file: &Path) -> Output {
    Command::new(venv_program("actionlint", CHECKER))
        .arg("-no-color")
        .arg("-shellcheck")
        .arg(shellcheck())
        .arg(file)
        .output()
        .expect("running actionlint")
}

fn schema_check(file: &Path) -> Output {
    Command::new(venv_program("check-jsonschema", CHECKER))
        .args(["--builtin-schema", "vendor.github-workflows"])
        .arg(file)
        .output()
        .expect("running check-jsonschema")
}

#[test]
fn the_ci_workflow_passes_actionlint() {
    let out = actionlint(&root().join(WORKFLOW));
    assert!(
        out.status.success(),
        "actionlint rejects {WORKFLOW}: {}",
        shown(&out)
    );
}

#[test]
fn the_ci_workflow_matches_the_github_workflow_schema() {
    let out = schema_check(&root().join(WORKFLOW));
    assert!(
        out.status.success(),
        "{WORKFLOW} does not match GitHub's workflow schema: {}",
        shown(&out)
    );
}

/// Each broken copy, and what actionlint must say of it.
#[test]
fn actionlint_rejects_a_broken_workflow() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cases = [
        // A shell mistake: proves shellcheck checks the run: scripts.
        (
            "unquoted.yml",
            "rustc --version",
            "echo $HOME/bin",
            "SC2086",
        ),
        // An expression naming a step that does not exist.
        (
            "expression.yml",
            "if: always()",
            "if: ${{ steps.build.outputs.ok }}",
            "property \"build\" is not defined",
        ),
        // A misspelt input of an action.
        (
            "input.yml",
            "if-no-files-found: warn",
            "if-no-file-found: warn",
            "input \"if-no-file-found\" is not defined",
        ),
    ];
    for (name, from, to, said) in cases {
        let copy = broken_copy(WORKFLOW, dir.path(), name, from, to);
        let out = actionlint(&copy);
        let text = shown(&out);
        assert!(
            !out.status.success() && text.contains(said),
            "actionlint should reject {name} ({from:?} -> {to:?}) saying {said:?}: {text}"
        );
    }
}

#[test]
fn the_schema_rejects_a_broken_workflow() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cases = [
        // A job without runs-on.
        (
            "runs-on.yml",
            "runs-on: ubuntu-24.04",
            "runs_on: ubuntu-24.04",
            "'runs-on' is a required property",
        ),
        // A number given as a word.
        (
            "timeout.yml",
            "timeout-minutes: 30",
            "timeout-minutes: thirty",
            "'thirty' is not of type 'number'",
        ),
        // An event GitHub does not have.
        ("event.yml", "  push:\n", "  pushed:\n", "$.on:"),
    ];
    for (name, from, to, said) in cases {
        let copy = broken_copy(WORKFLOW, dir.path(), name, from, to);
        let out = schema_check(&copy);
        let text = shown(&out);
        assert!(
            !out.status.success() && text.contains(said),
            "the schema should reject {name} ({from:?} -> {to:?}) saying {said:?}: {text}"
        );
    }
}

/// The workflow builds as the runner's user (cargo from the runner's rustup is
/// not on root's PATH) and installs only the runtime packages: no mode flag.
#[test]
fn the_ci_workflow_builds_without_sudo_and_installs_only_the_runtime() {
    let text = read(WORKFLOW);
    let runs: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let sudo_cargo: Vec<&&str> = runs
        .iter()
        .filter(|l| l.contains("sudo") && l.contains("cargo"))
        .collect();
    assert!(sudo_cargo.is_empty(), "cargo under sudo: {sudo_cargo:?}");
    assert!(
        runs.iter()
            .any(|l| l.contains("cargo build --release --locked")),
        "{WORKFLOW} has no `cargo build --release --locked`"
    );
    let setups: Vec<&&str> = runs.iter().filter(|l| l.contains("setup.sh")).collect();
    assert_eq!(
        setups,
        [&"run: sudo bash scripts/setup.sh"],
        "{WORKFLOW} should install the runtime packages only, once"
    );
}
