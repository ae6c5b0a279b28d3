//! `tunbench hosts FILE [--ansible]`: a placed lab's machines, and the
//! Ansible inventory deploy/ansible's playbook reads, which for
//! home-split.toml says what deploy/ansible/home-split.yml says.

use crate::common::*;

#[test]
fn hosts_lists_each_machine_with_its_underlay_and_nodes() {
    let o = tunbench(&["hosts", topo("home-split.toml").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "pc 198.18.230.1 mtu 1550 nodes pc\n\
         router 198.18.230.2 mtu 1550 nodes nvr\n\
         server 198.18.230.3 mtu 1550 nodes server\n"
    );
}

#[test]
fn the_ansible_inventory_matches_the_shipped_one() {
    let o = tunbench(&[
        "hosts",
        topo("home-split.toml").to_str().unwrap(),
        "--ansible",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let made = String::from_utf8_lossy(&o.stdout);
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/ansible/home-split.yml"),
    )
    .expect("reading deploy/ansible/home-split.yml");
    // Every line but comments is in the shipped inventory, in the same
    // order (the shipped one adds the probes).
    let mut rest = shipped.as_str();
    for line in made.lines().filter(|l| !l.starts_with('#')) {
        let at = rest
            .find(&format!("{line}\n"))
            .unwrap_or_else(|| panic!("home-split.yml lacks {line:?} (in order): {made}"));
        rest = &rest[at + line.len()..];
    }
    assert!(
        made.contains("    server:\n      ansible_host: 198.18.230.3\n"),
        "{made}"
    );
}

#[test]
fn a_file_without_hosts_is_refused() {
    let file = topo("router.toml");
    let o = tunbench(&["hosts", file.to_str().unwrap(), "--ansible"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("router.toml declares no [hosts]; it is one machine's lab"),
        "{}",
        text(&o)
    );
    assert!(o.stdout.is_empty());
}
