//! `tunbench hosts FILE`: the machines a placed lab runs on (`[hosts]`), a
//! line each, or with `--ansible` an Ansible inventory (YAML) for
//! deploy/ansible's playbook: one host per `[hosts.NAME]`, reached at its
//! underlay address, in the group `tunbench`.

use crate::topology::{self, Topology};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct HostsArgs {
    pub file: PathBuf,
    /// Print an Ansible inventory (YAML) instead of a line per host.
    #[arg(long)]
    pub ansible: bool,
}

/// The command: load the file, print its hosts; exit 2 when it has none.
pub fn hosts(a: HostsArgs) -> Result<i32> {
    let t = topology::load(&a.file, crate::lab::this_kernel())?;
    if t.placement.is_none() {
        return Err(super::bad_input(format!(
            "{} declares no [hosts]; it is one machine's lab",
            a.file.display()
        )));
    }
    let text = if a.ansible {
        ansible_inventory(&t)
    } else {
        host_lines(&t)
    };
    print!("{text}");
    Ok(0)
}

/// The nodes host `index` builds, in file order.
fn nodes_on(t: &Topology, index: usize) -> Vec<&str> {
    let Some(pl) = &t.placement else {
        return Vec::new();
    };
    t.nodes
        .iter()
        .zip(&pl.node_host)
        .filter(|(_, h)| **h == Some(index))
        .map(|(n, _)| n.name.as_str())
        .collect()
}

/// `NAME ADDRESS mtu N nodes A,B`, a line per host, sorted by name.
pub fn host_lines(t: &Topology) -> String {
    let Some(pl) = &t.placement else {
        return String::new();
    };
    pl.hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            format!(
                "{} {} mtu {} nodes {}\n",
                h.name,
                h.underlay,
                h.mtu,
                nodes_on(t, i).join(",")
            )
        })
        .collect()
}

/// A YAML inventory: group `tunbench`, each host's `ansible_host` its
/// underlay address. Host names are TOML keys of letters, digits, `-` and
/// `_` and addresses print without YAML specials, so nothing needs quoting
/// but an IPv6 address (its colons), which is quoted.
pub fn ansible_inventory(t: &Topology) -> String {
    let mut out = String::from(
        "# Ansible inventory for deploy/ansible/lab.yml, from the topology's [hosts]:\n\
         # ansible_host is each host's underlay address.\ntunbench:\n  hosts:\n",
    );
    if let Some(pl) = &t.placement {
        for h in &pl.hosts {
            let addr = match h.underlay {
                std::net::IpAddr::V4(a) => a.to_string(),
                std::net::IpAddr::V6(a) => format!("\"{a}\""),
            };
            out.push_str(&format!("    {}:\n      ansible_host: {addr}\n", h.name));
        }
    }
    out.push_str("  vars:\n    ansible_user: root\n");
    out
}
