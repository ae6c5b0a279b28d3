//! A host interface's state read before it is moved: what `down` restores.

use super::dump::{
    RT_TABLE_MAIN, address_flags, dump_addresses, dump_links, dump_routes, link_kind, link_mac,
    link_mtu, link_perm_mac, route_oifs, saved_route, table_of,
};
use crate::netlink::{address_of, link_name};
use crate::socket::handle_in_file;
use crate::state::{HostInterface, SavedAddress};
use crate::{namespace, sysctl};
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressMessage, AddressProtocol,
};
use netlink_packet_route::link::LinkFlags;
use netlink_packet_route::route::{RouteAttribute, RouteMessage, RouteProtocol};
use std::fs::File;
use std::io;
use std::path::PathBuf;

/// Read a host interface's state before it is moved: what `down` restores.
pub async fn read_interface(host: &File, name: &str) -> io::Result<HostInterface> {
    let h = handle_in_file(host)?;
    let links = dump_links(&h).await.map_err(io::Error::other)?;
    let l = links
        .iter()
        .find(|l| link_name(l) == Some(name))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {name} in the host's namespace"),
            )
        })?;
    let index = l.header.index;
    let addresses = dump_addresses(&h).await.map_err(io::Error::other)?;
    let routes = dump_routes(&h).await.map_err(io::Error::other)?;
    let dev = name.to_string();
    Ok(HostInterface {
        ifindex: index,
        name: name.to_string(),
        kind: link_kind(l),
        mac: link_mac(l),
        perm_mac: link_perm_mac(l),
        mtu: link_mtu(l).unwrap_or(0),
        up: l.header.flags.contains(LinkFlags::Up),
        addresses: addresses
            .iter()
            .filter(|a| a.header.index == index)
            .filter_map(|a| saved_address(a, name))
            .collect(),
        routes: routes
            .iter()
            .filter(|r| goes_back_with(r, index))
            .filter_map(saved_route)
            .collect(),
        sysctls: namespace::run_in_file(host, move || Ok(read_sysctls(&dev)))?,
    })
}

/// A permanent address of the interface `name`, unless the kernel's own (IPv6
/// link-local, SLAAC), which come back by themselves.
fn saved_address(a: &AddressMessage, name: &str) -> Option<SavedAddress> {
    let flags = address_flags(a);
    let protocol = a.attributes.iter().find_map(|at| match at {
        AddressAttribute::Protocol(p) => Some(u8::from(*p)),
        _ => None,
    });
    let kernels = matches!(
        protocol.map(AddressProtocol::from),
        Some(
            AddressProtocol::Loopback
                | AddressProtocol::RouterAnnouncement
                | AddressProtocol::LinkLocal
        )
    );
    if flags & AddressFlags::Permanent.bits() == 0 || kernels {
        return None;
    }
    Some(SavedAddress {
        addr: address_of(a)?,
        broadcast: a.attributes.iter().find_map(|at| match at {
            AddressAttribute::Broadcast(b) => Some(*b),
            _ => None,
        }),
        label: a.attributes.iter().find_map(|at| match at {
            AddressAttribute::Label(l) if l != name => Some(l.clone()),
            _ => None,
        }),
        scope: a.header.scope.into(),
        flags,
        protocol,
    })
}

/// Whether `down` puts route `r` back with the interface `index`: a route of
/// the main table out of it alone, not the kernel's own (proto kernel, ra),
/// not multipath nor by nexthop object.
fn goes_back_with(r: &RouteMessage, index: u32) -> bool {
    let own = matches!(r.header.protocol, RouteProtocol::Kernel | RouteProtocol::Ra);
    !(own
        || table_of(r) != RT_TABLE_MAIN
        || r.attributes
            .iter()
            .any(|a| matches!(a, RouteAttribute::MultiPath(_) | RouteAttribute::NhId(_)))
        || route_oifs(r) != [index])
}

/// Every readable net.ipv4.conf.DEV.* and net.ipv6.conf.DEV.*, in the calling
/// thread's namespace, as sysctl keys (a '.' in DEV written '/').
fn read_sysctls(dev: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for family in ["ipv4", "ipv6"] {
        let dir = PathBuf::from(format!("/proc/sys/net/{family}/conf/{dev}"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        files.sort();
        for f in files {
            let key = format!("net.{family}.conf.{}.{f}", dev.replace('.', "/"));
            if let Ok(value) = sysctl::read(&key) {
                v.push((key, value));
            }
        }
    }
    v
}
