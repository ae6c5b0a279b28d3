//! Who runs a peer of an overlay: tunbench's own datapath, an external
//! WireGuard implementation (wireguard-go, boringtun-cli), or the kernel's.

use crate::topology::{KeyPath, Problem};

/// Who runs a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Implementation {
    /// boringtun's protocol core on tunbench's shared driver.
    Tunbench,
    /// Debian's wireguard-go, configured through its UAPI socket.
    WireguardGo,
    /// boringtun-cli, boringtun's own device loop.
    Boringtun,
    /// The kernel's WireGuard device, configured over generic netlink.
    Kernel,
}

impl Implementation {
    pub fn as_str(self) -> &'static str {
        match self {
            Implementation::Tunbench => "tunbench",
            Implementation::WireguardGo => "wireguard-go",
            Implementation::Boringtun => "boringtun",
            Implementation::Kernel => "kernel",
        }
    }

    /// The program an external implementation runs, and where it comes from.
    pub fn program(self) -> Option<(&'static str, &'static str)> {
        match self {
            Implementation::Tunbench | Implementation::Kernel => None,
            Implementation::WireguardGo => Some((
                "wireguard-go",
                "Debian's package wireguard-go (apt-get install wireguard-go)",
            )),
            Implementation::Boringtun => Some((
                "boringtun-cli",
                "crates.io (cargo install --locked boringtun-cli --version 0.7.1)",
            )),
        }
    }
}

/// The implementation the file names; none: `default`.
pub(super) fn parse(
    s: Option<&str>,
    default: Implementation,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Implementation {
    match s {
        None => default,
        Some("tunbench") => Implementation::Tunbench,
        Some("wireguard-go") => Implementation::WireguardGo,
        Some("boringtun") | Some("boringtun-cli") => Implementation::Boringtun,
        Some("kernel") => Implementation::Kernel,
        Some(o) => {
            p.push(Problem::new(
                at,
                format!("implementation \"{o}\" is not one of \"tunbench\", \"wireguard-go\", \"boringtun\", \"kernel\""),
            ));
            default
        }
    }
}
