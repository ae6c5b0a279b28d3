//! The Kubernetes example (deploy/kubernetes/tunbench-host.yaml) is checked
//! offline against the Kubernetes API's OpenAPI schemas, which
//! kubernetes-validate bundles (strict: an unknown field fails), and the lab
//! its ConfigMap carries goes through the same library call `tunbench
//! validate` makes. Deliberately broken copies show the checker rejects what
//! it should. No cluster runs here. The checker lives where `bash
//! scripts/setup.sh --tests` puts it (target/ci-tools/venv); a missing one
//! fails the test, naming that command.

use crate::example_files::{broken_copy, read, root, shown, venv_program};
use std::path::Path;
use std::process::{Command, Output};

const EXAMPLE: &str = "deploy/kubernetes/tunbench-host.yaml";
/// The ConfigMap key that holds the topology, a YAML literal block.
const LAB_KEY: &str = "lab.toml: |";

fn validate(file: &Path) -> Output {
    Command::new(venv_program(
        "kubernetes-validate",
        "the Kubernetes example's checker",
    ))
    .arg("--strict")
    .arg(file)
    .output()
    .expect("running kubernetes-validate")
}

/// The literal block under `lab.toml: |`, its indentation taken off: the
/// lines indented deeper than the key, up to the first that is not.
fn lab_toml(yaml: &str) -> String {
    let mut lines = yaml.lines();
    let key = lines
        .by_ref()
        .find(|l| l.trim_start() == LAB_KEY)
        .unwrap_or_else(|| panic!("{EXAMPLE}: no `{LAB_KEY}` in the ConfigMap"));
    let key_indent = key.len() - key.trim_start().len();
    let block: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > key_indent)
        .collect();
    let indent = block
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or_else(|| panic!("{EXAMPLE}: `{LAB_KEY}` holds nothing"));
    block
        .iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_kubernetes_example_matches_the_api_schema() {
    let out = validate(&root().join(EXAMPLE));
    let text = shown(&out);
    assert!(
        out.status.success(),
        "{EXAMPLE} does not match the Kubernetes API schema: {text}"
    );
    // Every object was checked, none passed over for want of a schema.
    for object in ["namespace/", "configmap/", "daemonset/"] {
        assert!(
            text.contains(&format!("passed for resource {object}")),
            "kubernetes-validate did not check the {object} object: {text}"
        );
    }
}

#[test]
fn the_kubernetes_example_carries_a_placed_lab_that_validates() {
    let text = lab_toml(&read(EXAMPLE));
    let path = Path::new("lab.toml");
    let t = tunbench::topology::parse_str(&text, path)
        .unwrap_or_else(|e| panic!("{EXAMPLE}: the ConfigMap's lab.toml does not validate: {e}"));
    let placement = t
        .placement
        .as_ref()
        .unwrap_or_else(|| panic!("{EXAMPLE}: the ConfigMap's lab declares no [hosts]"));
    assert!(
        placement.hosts.len() >= 2,
        "{EXAMPLE}: the lab should span at least two nodes: {:?}",
        placement.hosts
    );
}

#[test]
fn the_kubernetes_example_runs_the_same_commands() {
    let text = read(EXAMPLE);
    for said in [
        "tunbench up /etc/tunbench/lab.toml --host $(NODE_NAME)",
        "fieldPath: spec.nodeName",
        "hostNetwork: true",
        "privileged: true",
        "mountPropagation: Bidirectional",
        r#"command: ["tunbench", "down", "k8s-pair"]"#,
    ] {
        assert!(text.contains(said), "{EXAMPLE} no longer holds {said:?}");
    }
}

/// Each broken copy, and what kubernetes-validate must say of it.
#[test]
fn the_schema_rejects_a_broken_kubernetes_example() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cases = [
        // A misspelt field: only strict validation catches it.
        (
            "misspelt.yaml",
            "hostNetwork: true",
            "hostNetwrok: true",
            "'hostNetwrok' was unexpected",
        ),
        // A number given as words.
        (
            "type.yaml",
            "terminationGracePeriodSeconds: 120",
            "terminationGracePeriodSeconds: two minutes",
            "'two minutes' is not of type 'integer'",
        ),
        // A required field left out: a DaemonSet's pods need a template.
        (
            "required.yaml",
            "  template:\n    metadata:",
            "  templat:\n    metadata:",
            "'template' is a required property",
        ),
    ];
    for (name, from, to, said) in cases {
        let copy = broken_copy(EXAMPLE, dir.path(), name, from, to);
        let out = validate(&copy);
        let text = shown(&out);
        assert!(
            !out.status.success() && text.contains(said),
            "kubernetes-validate should reject {name} ({from:?} -> {to:?}) saying {said:?}: {text}"
        );
    }
}
