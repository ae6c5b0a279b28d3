//! A moved interface given back to the host by `down` and `clean`: found
//! wherever it is now, moved back under its own name, its state restored.

use super::dump::{dump_links, link_kind, link_mac, link_perm_mac};
use super::preflight::other_labs;
use super::restore::restore;
use crate::namespace;
use crate::netlink::{errno, link_name, reason};
use crate::socket::handle_in_file;
use crate::state::{HostInterface, HostLinkRecord, INIT};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::{Handle, LinkUnspec};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Why a moved interface was not given back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotGiven {
    /// It could not be, now: its namespace and the record stay for a retry.
    Failed(String),
    /// Another lab holds it: there is nothing of this lab's to give back.
    NotOurs(String),
}

impl std::fmt::Display for NotGiven {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            NotGiven::Failed(why) | NotGiven::NotOurs(why) => f.write_str(why),
        }
    }
}

impl From<String> for NotGiven {
    fn from(why: String) -> Self {
        NotGiven::Failed(why)
    }
}

/// Give a moved interface back to the host namespace `host` under its original
/// name, and restore what the record holds: MTU, MAC, per-device sysctls,
/// addresses, up/down state, routes. Where it was found and what could not be
/// restored (no retry would), or why it failed (a retry may succeed).
pub async fn give_back(
    host: &File,
    rec: &HostLinkRecord,
    lab: &str,
) -> Result<(String, Vec<String>), NotGiven> {
    let Some(iface) = &rec.moved else {
        return Ok((String::new(), Vec::new()));
    };
    let hh = handle_in_file(host).map_err(|e| format!("netlink in the host's namespace: {e}"))?;
    let at = locate(host, &hh, rec, iface, lab).await?;
    if at.ns.is_some() {
        move_back(host, &hh, &at, iface).await?;
    }
    let place = at.place;
    let warnings = restore(host, &hh, iface)
        .await
        .map_err(|e| format!("{e} (it is back in the host's namespace, from {place})"))?;
    Ok((place, warnings))
}

/// Where a moved interface was found, and under which index and name.
struct Found {
    place: String,
    ns: Option<File>,
    handle: Handle,
    index: u32,
}

/// One request: to the host, under its name (a name taken there would fail
/// it, leaving the interface where it is), down, its old index if free.
async fn move_back(
    host: &File,
    hh: &Handle,
    at: &Found,
    iface: &HostInterface,
) -> Result<(), NotGiven> {
    let host_links = dump_links(hh).await?;
    let index_free = !host_links.iter().any(|l| l.header.index == iface.ifindex);
    let send = |keep_index: bool| {
        let mut m = LinkUnspec::new_with_index(at.index)
            .setns_by_fd(host.as_raw_fd())
            .name(iface.name.clone())
            .down();
        if keep_index {
            m = m.append_extra_attribute(LinkAttribute::NewIfIndex(iface.ifindex as i32));
        }
        at.handle.link().set(m.build()).execute()
    };
    let place = &at.place;
    match send(index_free).await {
        Ok(()) => Ok(()),
        Err(e) if index_free && errno(&e) != Some(libc::EEXIST) => send(false)
            .await
            .map_err(|e| format!("moving it back from {place}: {}", reason(e)).into()),
        Err(e) => Err(format!("moving it back from {place}: {}", reason(e)).into()),
    }
}

/// The link of `links` that is `iface`: by name (with its MAC), else by its MAC
/// among devices of its kind (ipvlan and VLAN devices share their lower's MAC;
/// a macvlan has its own, but is never the interface itself).
pub(super) fn find_link<'a>(
    links: &'a [LinkMessage],
    iface: &HostInterface,
    name: &str,
) -> Option<&'a LinkMessage> {
    let mac_matches = |l: &LinkMessage| match (&iface.perm_mac, link_perm_mac(l)) {
        (Some(p), Some(q)) => *p == q,
        _ => link_mac(l) == iface.mac,
    };
    let same_kind = |l: &LinkMessage| link_kind(l) == iface.kind;
    links
        .iter()
        .find(|l| link_name(l) == Some(name) && mac_matches(l) && same_kind(l))
        .or_else(|| {
            links
                .iter()
                .find(|l| mac_matches(l) && same_kind(l) && !iface.mac.is_empty())
        })
}

/// The node's namespace first (the usual place), then the host's (an `up`
/// killed before the move, or a return that got this far), then elsewhere:
/// namespaces of no other lab, and the init namespace, where a deleted
/// namespace sends a physical NIC.
async fn locate(
    host: &File,
    host_handle: &Handle,
    rec: &HostLinkRecord,
    iface: &HostInterface,
    lab: &str,
) -> Result<Found, NotGiven> {
    let host_id = host.metadata().ok().map(|m| (m.dev(), m.ino()));
    let search = |path: PathBuf, place: String| async move {
        let f = File::open(&path).ok()?;
        if f.metadata().ok().map(|m| (m.dev(), m.ino())) == host_id {
            return None;
        }
        let h = handle_in_file(&f).ok()?;
        let links = dump_links(&h).await.ok()?;
        let index = find_link(&links, iface, &rec.name)?.header.index;
        Some(Found {
            place,
            ns: Some(f),
            handle: h,
            index,
        })
    };
    if namespace::exists(&rec.ns) && !namespace::is_placeholder(&rec.ns) {
        let place = format!("namespace {}", rec.ns);
        if let Some(f) = search(namespace::path(&rec.ns), place).await {
            return Ok(f);
        }
    }
    let host_links = dump_links(host_handle).await?;
    if let Some(l) = find_link(&host_links, iface, &iface.name) {
        return Ok(Found {
            place: "the host".into(),
            ns: None,
            handle: host_handle.clone(),
            index: l.header.index,
        });
    }
    for n in namespace::list() {
        if !may_hold(&n, rec, lab).await {
            continue;
        }
        let place = format!("namespace {n}");
        if let Some(f) = search(namespace::path(&n), place).await {
            return Ok(f);
        }
    }
    let place = "the init namespace".to_string();
    if let Some(f) = search(INIT.into(), place).await {
        return Ok(f);
    }
    Err(not_found(rec, iface, lab))
}

/// Whether namespace `n`, not the node's, may hold a lost interface: it is
/// no other lab's.
async fn may_hold(n: &str, rec: &HostLinkRecord, lab: &str) -> bool {
    if n == rec.ns || namespace::is_placeholder(n) {
        return false;
    }
    match crate::inspect::marker_of(n).await {
        Ok(Some(m)) => m == lab,
        Err(_) => false,
        Ok(None) => true,
    }
}

/// Found nowhere. When another lab that moved the same interface holds it,
/// this lab's `up` lost the race for it (its move failed), so there is
/// nothing of ours to give.
fn not_found(rec: &HostLinkRecord, iface: &HostInterface, lab: &str) -> NotGiven {
    let holder = other_labs(lab).into_iter().find(|o| {
        o.link.host == rec.host && o.link.moved.as_ref().is_some_and(|m| m.mac == iface.mac)
    });
    if let Some(o) = holder {
        return NotGiven::NotOurs(format!(
            "lab {} holds it (moved into {} as {}); this lab never had it",
            o.lab, o.link.ns, o.link.name
        ));
    }
    NotGiven::Failed(format!(
        "not found: no {} in {} and no interface with MAC {} in any namespace",
        rec.name, rec.ns, iface.mac
    ))
}
