//! What is in a namespace now: devices, their state and addresses (for `status`).

use crate::netlink::{address_of, reason};
use crate::socket::handle_in;
use futures::TryStreamExt;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, Prop, State};
use serde::Serialize;
use std::collections::HashMap;
use std::io;

#[derive(Debug, Clone, Serialize)]
pub struct Device {
    pub name: String,
    pub index: u32,
    pub kind: String,
    pub mtu: u32,
    pub up: bool,
    /// Operational state as the kernel reports it: "up", "down", "unknown", ...
    pub state: String,
    pub master: Option<String>,
    pub altnames: Vec<String>,
    pub addresses: Vec<String>,
}

pub async fn devices(ns: &str) -> io::Result<Vec<Device>> {
    let h = handle_in(ns)?;
    let links: Vec<_> = h
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| io::Error::other(reason(e)))?;
    let addrs: Vec<_> = h
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| io::Error::other(reason(e)))?;
    let mut by_index: HashMap<u32, Vec<String>> = HashMap::new();
    for a in addrs {
        if let Some(net) = address_of(&a) {
            by_index.entry(a.header.index).or_default().push(format!(
                "{}/{}",
                net.ip(),
                net.prefix()
            ));
        }
    }
    let mut names: HashMap<u32, String> = HashMap::new();
    for l in &links {
        for at in &l.attributes {
            if let LinkAttribute::IfName(n) = at {
                names.insert(l.header.index, n.clone());
            }
        }
    }
    let mut out = Vec::new();
    for l in links {
        let mut d = Device {
            name: names.get(&l.header.index).cloned().unwrap_or_default(),
            index: l.header.index,
            kind: String::new(),
            mtu: 0,
            up: l.header.flags.contains(LinkFlags::Up),
            state: String::new(),
            master: None,
            altnames: Vec::new(),
            addresses: by_index.remove(&l.header.index).unwrap_or_default(),
        };
        for at in &l.attributes {
            match at {
                LinkAttribute::Mtu(m) => d.mtu = *m,
                LinkAttribute::OperState(s) => d.state = state_word(s),
                LinkAttribute::Controller(i) => d.master = names.get(i).cloned(),
                LinkAttribute::PropList(props) => {
                    for p in props {
                        if let Prop::AltIfName(n) = p {
                            d.altnames.push(n.clone());
                        }
                    }
                }
                LinkAttribute::LinkInfo(infos) => {
                    for i in infos {
                        if let LinkInfo::Kind(k) = i {
                            d.kind = k.to_string();
                        }
                    }
                }
                _ => {}
            }
        }
        if d.kind.is_empty() && d.name == "lo" {
            d.kind = "loopback".into();
        }
        out.push(d);
    }
    out.sort_by_key(|d| d.index);
    Ok(out)
}

fn state_word(s: &State) -> String {
    match s {
        State::Up => "up",
        State::Down => "down",
        State::Unknown => "unknown",
        State::LowerLayerDown => "lowerlayerdown",
        State::NotPresent => "notpresent",
        State::Testing => "testing",
        State::Dormant => "dormant",
        _ => "other",
    }
    .to_string()
}

/// The lab marker on a namespace's lo, if it carries one.
pub async fn marker_of(ns: &str) -> io::Result<Option<String>> {
    let h = handle_in(ns)?;
    let links: Vec<_> = h
        .link()
        .get()
        .match_index(1)
        .execute()
        .try_collect()
        .await
        .map_err(|e| io::Error::other(reason(e)))?;
    for l in links {
        for at in &l.attributes {
            if let LinkAttribute::PropList(props) = at {
                for p in props {
                    if let Prop::AltIfName(n) = p {
                        if let Some(lab) = n.strip_prefix("tunbench.") {
                            return Ok(Some(lab.to_string()));
                        }
                    }
                }
            }
        }
    }
    Ok(None)
}

/// Every address of the namespace this process runs in (the host's, or an
/// emulated host's): how `up` finds which declared host this machine is.
/// Must be called inside a tokio runtime.
pub async fn local_addresses() -> io::Result<Vec<std::net::IpAddr>> {
    let (conn, h, _) = rtnetlink::new_connection()?;
    tokio::spawn(conn);
    let addrs: Vec<_> = h
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| io::Error::other(reason(e)))?;
    Ok(addrs
        .iter()
        .filter_map(address_of)
        .map(|n| n.ip())
        .collect())
}
