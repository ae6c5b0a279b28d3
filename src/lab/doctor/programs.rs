//! The external programs: those tunbench runs (found where it finds them: on
//! PATH, or where Debian installs strongSwan) and those a user reaches for
//! beside it, each with its version as the program prints it.

use super::{Check, Kind};
use crate::endpoint::external::find_program;
use crate::vocab::programs::Install;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a program may take to print its version.
const VERSION_WAIT: Duration = Duration::from_secs(2);

/// One program: how it is found and asked its version, where it comes from,
/// what needs it, what tunbench does without it.
struct Program {
    name: &'static str,
    at: Located,
    version_args: &'static [&'static str],
    from: &'static str,
    needed_by: &'static str,
    without: &'static str,
}

enum Located {
    /// On PATH, as `Command::new(name)` finds it.
    Path,
    /// Where Debian installs strongSwan (`vocab::programs::Install`).
    Strongswan(fn(&Install) -> PathBuf),
}

const NOT_RUN: &str = "nothing changes for tunbench";

const PROGRAMS: &[Program] = &[
    Program {
        name: "tc",
        at: Located::Path,
        version_args: &["-V"],
        from: "Debian's iproute2",
        needed_by: "rates, impaired links and userspace routers (`up`, `impair`): tunbench runs `tc -batch -`",
        without: "`up` of such a lab fails naming tc, and removes what it built; `impair` fails naming tc",
    },
    Program {
        name: "nft",
        at: Located::Path,
        version_args: &["--version"],
        from: "Debian's nftables",
        needed_by: "DS-Lite's kernel datapath (MSS clamp, NAT44): tunbench runs `nft -f -`",
        without: "`up` of a DS-Lite lab on the kernel datapath fails naming nft; `datapath = \"userspace\"` needs no nft",
    },
    Program {
        name: "charon",
        at: Located::Strongswan(|i| i.charon.clone()),
        version_args: &["--version"],
        from: "Debian's strongswan-charon, libcharon-extra-plugins and libstrongswan-standard-plugins",
        needed_by: "IKEv2 tunnels: strongSwan's daemon, with ESP in userspace (kernel-libipsec) or the kernel's (kernel-netlink)",
        without: "`validate` and `up` refuse an IKEv2 tunnel, naming the packages",
    },
    Program {
        name: "swanctl",
        at: Located::Strongswan(|i| i.swanctl.clone()),
        version_args: &["--help"],
        from: "Debian's strongswan-swanctl",
        needed_by: "IKEv2 tunnels: loads charon's connections and reads its SAs",
        without: "`validate` and `up` refuse an IKEv2 tunnel, naming the packages",
    },
    Program {
        name: "pki",
        at: Located::Strongswan(|i| i.pki.clone()),
        version_args: &["--help"],
        from: "Debian's strongswan-pki",
        needed_by: "IKEv2 tunnels with `auth = \"cert\"`: the lab's CA and certificates",
        without: "`validate` and `up` refuse such a tunnel, naming the package",
    },
    Program {
        name: "wireguard-go",
        at: Located::Path,
        version_args: &["--version"],
        from: "Debian's wireguard-go",
        needed_by: "WireGuard peers with `implementation = \"wireguard-go\"`",
        without: "`up` of such a lab fails naming the program; the default implementation is tunbench's own",
    },
    Program {
        name: "boringtun-cli",
        at: Located::Path,
        version_args: &["--version"],
        from: "crates.io (cargo install --locked boringtun-cli --version 0.7.1)",
        needed_by: "WireGuard peers with `implementation = \"boringtun\"`",
        without: "`up` of such a lab fails naming the program; the default implementation is tunbench's own",
    },
    Program {
        name: "ip",
        at: Located::Path,
        version_args: &["-V"],
        from: "Debian's iproute2",
        needed_by: "not run by tunbench (it speaks netlink itself); to look into a lab: `tunbench exec LAB NODE ip addr`",
        without: NOT_RUN,
    },
    Program {
        name: "iperf3",
        at: Located::Path,
        version_args: &["--version"],
        from: "Debian's iperf3",
        needed_by: "not run by tunbench (its client and server speak iperf3's protocol); a stock iperf3 is a peer of `tunbench server`, `client` and `measure --to ADDRESS`",
        without: NOT_RUN,
    },
    Program {
        name: "wg",
        at: Located::Path,
        version_args: &["--version"],
        from: "Debian's wireguard-tools",
        needed_by: "not run by tunbench; takes what `tunbench keys` prints for a device outside the lab (`wg setconf`)",
        without: NOT_RUN,
    },
    Program {
        name: "ethtool",
        at: Located::Path,
        version_args: &["--version"],
        from: "Debian's ethtool",
        needed_by: "not run by tunbench; shows a lab device's offloads (`tunbench exec LAB NODE ethtool -k DEV`)",
        without: NOT_RUN,
    },
    Program {
        name: "ping",
        at: Located::Path,
        version_args: &["-V"],
        from: "Debian's iputils-ping",
        needed_by: "not run by tunbench (`check` and `reach` send their own ICMP echoes)",
        without: NOT_RUN,
    },
];

/// The program names, in the order doctor lists them.
pub(super) fn names() -> Vec<&'static str> {
    PROGRAMS.iter().map(|p| p.name).collect()
}

/// Every program looked for, each on a thread of its own.
pub(super) fn checks() -> Vec<Check> {
    std::thread::scope(|s| {
        let running: Vec<_> = PROGRAMS.iter().map(|p| s.spawn(|| check(p))).collect();
        running
            .into_iter()
            .zip(PROGRAMS)
            .map(|(h, p)| {
                h.join().unwrap_or_else(|_| Check {
                    detail: Some("looking for it panicked".into()),
                    ..absent(p)
                })
            })
            .collect()
    })
}

fn absent(p: &Program) -> Check {
    Check {
        name: p.name.into(),
        kind: Kind::Program,
        required: false,
        available: false,
        version: None,
        what: format!("from {}", p.from),
        detail: None,
        needed_by: p.needed_by.into(),
        without: p.without.into(),
    }
}

fn check(p: &Program) -> Check {
    let path = match &p.at {
        Located::Path => find_program(p.name),
        Located::Strongswan(at) => Some(at(&Install::expected())).filter(|f| f.is_file()),
    };
    let Some(path) = path else {
        return Check {
            detail: Some("not installed".into()),
            ..absent(p)
        };
    };
    // charon is of use only with the plugins an IKEv2 lab loads.
    let missing = match p.at {
        Located::Strongswan(_) if p.name == "charon" => Install::find(false).err(),
        _ => None,
    };
    Check {
        available: missing.is_none(),
        version: version(&path, p.version_args),
        detail: missing.or_else(|| Some(path.display().to_string())),
        ..absent(p)
    }
}

/// The version a program prints for `args`: the first word of its output
/// that looks like one.
fn version(path: &std::path::Path, args: &[&str]) -> Option<String> {
    let mut child = Command::new(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let until = Instant::now() + VERSION_WAIT;
    while child.try_wait().ok()?.is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().ok()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines().find_map(version_in)
}

/// "iproute2-6.1.0" -> 6.1.0, "v1.0.6" -> 1.0.6, "20221126" (iputils) ->
/// itself; words of plugin warnings and URLs are none.
pub(super) fn version_in(line: &str) -> Option<String> {
    line.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.contains("://"))
        .find_map(|w| {
            let tail = w.rsplit('-').next().unwrap_or(w);
            let v = tail.strip_prefix('v').unwrap_or(tail);
            let looks = v.starts_with(|c: char| c.is_ascii_digit())
                && v.chars().all(|c| c.is_ascii_digit() || c == '.')
                && (v.contains('.') || v.len() >= 8);
            looks.then(|| v.trim_end_matches('.').to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_each_program_prints_them() {
        for (line, want) in [
            ("ip utility, iproute2-6.1.0, libbpf 1.1.2", Some("6.1.0")),
            ("nftables v1.0.6 (Lester Gooch #5)", Some("1.0.6")),
            ("iperf 3.12 (cJSON 1.7.15)", Some("3.12")),
            ("Linux strongSwan 5.9.8", Some("5.9.8")),
            ("strongSwan 5.9.8 swanctl", Some("5.9.8")),
            ("wireguard-go v0.0.20220316", Some("0.0.20220316")),
            (
                "wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/",
                Some("1.0.20210914"),
            ),
            ("ethtool version 6.1", Some("6.1")),
            ("ping from iputils 20221126", Some("20221126")),
            ("boringtun 0.7.1", Some("0.7.1")),
            (
                "plugin 'ldap': failed to load - ldap_plugin_create not found",
                None,
            ),
            ("usage:", None),
        ] {
            assert_eq!(version_in(line).as_deref(), want, "{line}");
        }
    }

    #[test]
    fn every_program_is_listed_once() {
        let mut n = names();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), PROGRAMS.len());
    }
}
