//! The host-link part of a lab's record: the namespace `up` ran in, each
//! `Op::HostLink`, and for a moved interface the host's state of it, which
//! `down` puts back.

use crate::namespace;
use crate::ops::{HostAttach, Op, Plan};
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The namespace tunbench ran in at `up`, so that `down` (perhaps run elsewhere,
/// perhaps after the namespace lost its name) finds the same one again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostNetns {
    /// Device and inode of its nsfs file (/proc/thread-self/ns/net at `up`).
    pub dev: u64,
    pub inode: u64,
    /// Its name under /run/netns, if it had one.
    pub name: Option<String>,
    /// Whether it was the init namespace (/proc/1/ns/net).
    pub init: bool,
}

const THIS_THREAD: &str = "/proc/thread-self/ns/net";
/// The init namespace, where a deleted namespace sends a physical NIC.
pub(crate) const INIT: &str = "/proc/1/ns/net";

impl HostNetns {
    /// The calling thread's namespace, and a descriptor of it.
    pub fn current() -> io::Result<(HostNetns, File)> {
        let f = File::open(THIS_THREAD)?;
        let m = f.metadata()?;
        let same =
            |p: &Path| std::fs::metadata(p).is_ok_and(|o| o.dev() == m.dev() && o.ino() == m.ino());
        let name = namespace::list()
            .into_iter()
            .find(|n| same(&namespace::path(n)));
        let init = same(Path::new(INIT));
        let id = HostNetns {
            dev: m.dev(),
            inode: m.ino(),
            name,
            init,
        };
        Ok((id, f))
    }

    fn is(&self, f: &File) -> bool {
        f.metadata()
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.inode)
    }

    /// Open it again: the calling thread's namespace if it is that one, else the
    /// /run/netns namespace that is (its recorded name first), else /proc/1's.
    pub fn find(&self) -> Option<File> {
        let mut places: Vec<PathBuf> = vec![THIS_THREAD.into()];
        places.extend(self.name.iter().map(|n| namespace::path(n)));
        places.extend(namespace::list().iter().map(|n| namespace::path(n)));
        places.push(INIT.into());
        places
            .into_iter()
            .find_map(|p| File::open(p).ok().filter(|f| self.is(f)))
    }

    /// "the init namespace", "namespace hlh-12", "namespace nsfs inode 4026532"
    pub fn describe(&self) -> String {
        match (&self.name, self.init) {
            (_, true) => "the init namespace".into(),
            (Some(n), _) => format!("namespace {n}"),
            (None, false) => format!("the namespace with nsfs inode {}", self.inode),
        }
    }
}

/// One `Op::HostLink` as the lab's record holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLinkRecord {
    /// The node's namespace and its device there.
    pub ns: String,
    pub name: String,
    /// The host interface it is made from.
    pub host: String,
    pub attach: HostAttach,
    pub mtu: u32,
    /// For a moved interface: the host's state of it, read before anything was made.
    #[serde(default)]
    pub moved: Option<HostInterface>,
}

impl HostLinkRecord {
    /// "enp3s0 (moved into home-pc as eth0)"
    pub fn describe(&self) -> String {
        match self.attach {
            HostAttach::Move => format!("{} (moved into {} as {})", self.host, self.ns, self.name),
            a => format!("{} ({a} {} in {})", self.host, self.name, self.ns),
        }
    }
}

/// A plan's `Op::HostLink`s, as records (no host state yet).
pub fn host_links(plan: &Plan) -> Vec<HostLinkRecord> {
    plan.ops
        .iter()
        .filter_map(|op| match op {
            Op::HostLink {
                ns,
                name,
                host,
                attach,
                mtu,
            } => Some(HostLinkRecord {
                ns: ns.clone(),
                name: name.clone(),
                host: host.clone(),
                attach: *attach,
                mtu: *mtu,
                moved: None,
            }),
            _ => None,
        })
        .collect()
}

/// A host interface's state, as `down` puts it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInterface {
    pub ifindex: u32,
    pub name: String,
    /// The kernel's link kind ("veth"); None for a physical NIC.
    pub kind: Option<String>,
    /// Current MAC, and the permanent one where the driver reports it
    /// ("aa:bb:cc:dd:ee:ff").
    pub mac: String,
    pub perm_mac: Option<String>,
    pub mtu: u32,
    pub up: bool,
    /// Its permanent addresses, in the kernel's order (the first IPv4 one of a
    /// subnet is the primary).
    pub addresses: Vec<SavedAddress>,
    /// Routes of the main table that go out of it, other than the kernel's own
    /// (proto kernel) and router advertisements' (proto ra).
    pub routes: Vec<SavedRoute>,
    /// net.ipv4.conf.DEV.* and net.ipv6.conf.DEV.*, every readable one.
    pub sysctls: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedAddress {
    pub addr: IpNetwork,
    pub broadcast: Option<Ipv4Addr>,
    pub label: Option<String>,
    pub scope: u8,
    /// IFA_F_* flags as the kernel reported them.
    pub flags: u32,
    pub protocol: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedRoute {
    pub to: IpNetwork,
    pub via: Option<IpAddr>,
    pub src: Option<IpAddr>,
    pub metric: Option<u32>,
    pub protocol: u8,
    pub scope: u8,
    pub kind: u8,
    pub tos: u8,
    /// RTM flags (RTNH_F_ONLINK is the one that matters).
    pub flags: u32,
    pub pref: Option<u8>,
}

impl std::fmt::Display for SavedRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if self.to.prefix() == 0 {
            write!(f, "default")?;
        } else {
            write!(f, "{}", self.to)?;
        }
        if let Some(v) = self.via {
            write!(f, " via {v}")?;
        }
        if let Some(m) = self.metric {
            write!(f, " metric {m}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_interface_record_round_trips() {
        let r = HostLinkRecord {
            ns: "l-a".into(),
            name: "eth0".into(),
            host: "enp1s0".into(),
            attach: HostAttach::Move,
            mtu: 1500,
            moved: Some(HostInterface {
                ifindex: 3,
                name: "enp1s0".into(),
                kind: None,
                mac: "02:00:00:00:00:01".into(),
                perm_mac: None,
                mtu: 1500,
                up: true,
                addresses: vec![],
                routes: vec![SavedRoute {
                    to: "0.0.0.0/0".parse().unwrap(),
                    via: Some("198.18.0.1".parse().unwrap()),
                    src: None,
                    metric: Some(100),
                    protocol: 4,
                    scope: 0,
                    kind: 1,
                    tos: 0,
                    flags: 0,
                    pref: None,
                }],
                sysctls: vec![("net.ipv4.conf.enp1s0.rp_filter".into(), "2".into())],
            }),
        };
        assert_eq!(r.describe(), "enp1s0 (moved into l-a as eth0)");
        assert_eq!(
            r.moved.as_ref().unwrap().routes[0].to_string(),
            "default via 198.18.0.1 metric 100"
        );
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<HostLinkRecord>(&j).unwrap(), r);
    }
}
