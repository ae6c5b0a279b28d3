//! A given-back interface's recorded state put back in the host: name, MAC,
//! MTU, per-device sysctls, addresses, up/down, routes.

use super::dump::{RT_TABLE_MAIN, dump_links, link_mac, link_mtu};
use super::give_back::find_link;
use crate::netlink::{errno, link_name, reason};
use crate::state::{HostInterface, SavedAddress, SavedRoute};
use crate::{namespace, sysctl};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressProtocol, AddressScope,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RoutePreference, RouteProtocol,
    RouteScope, RouteType,
};
use rtnetlink::{Handle, LinkUnspec};
use std::fs::File;
use std::net::IpAddr;

/// Restore `iface`'s recorded state in the host; what could not be restored
/// but needs no retry (sysctls the kernel refuses).
pub(super) async fn restore(
    host: &File,
    h: &Handle,
    iface: &HostInterface,
) -> Result<Vec<String>, String> {
    let index = set_name_mac_mtu(h, iface).await?;
    // Per-device sysctls were reset from conf.default when it changed namespace;
    // before addresses and up, as some of them (addr_gen_mode, disable_ipv6) act then.
    let mut warnings = Vec::new();
    let failed = restore_sysctls(host, iface)?;
    if !failed.is_empty() {
        // Reported, not retried: the interface is back, and a sysctl the kernel
        // refuses now it would refuse on every retry.
        warnings.push(format!(
            "{}: sysctls not restored: {}",
            iface.name,
            failed.join("; ")
        ));
    }
    for a in &iface.addresses {
        add_address(h, index, a).await?;
    }
    if iface.up {
        h.link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(|e| format!("setting it up: {}", reason(e)))?;
    }
    for r in &iface.routes {
        add_route(h, index, r).await?;
    }
    Ok(warnings)
}

/// Find it in the host (by its name, else by its MAC) and give it back its
/// name, MAC and MTU, down if it was down; its index.
async fn set_name_mac_mtu(h: &Handle, iface: &HostInterface) -> Result<u32, String> {
    let links = dump_links(h).await?;
    let l = links
        .iter()
        .find(|l| link_name(l) == Some(iface.name.as_str()))
        .or_else(|| find_link(&links, iface, &iface.name))
        .ok_or_else(|| format!("{} is not in the host's namespace", iface.name))?;
    let index = l.header.index;
    let mut m = LinkUnspec::new_with_index(index);
    if link_name(l) != Some(iface.name.as_str()) {
        // Renaming needs it down; it is brought up again later if it was up.
        m = m.name(iface.name.clone()).down();
    }
    if !iface.up {
        m = m.down();
    }
    if link_mac(l) != iface.mac {
        if let Some(mac) = parse_mac(&iface.mac) {
            m = m.address(mac);
        }
    }
    if link_mtu(l) != Some(iface.mtu) {
        m = m.mtu(iface.mtu);
    }
    h.link()
        .set(m.build())
        .execute()
        .await
        .map_err(|e| format!("setting its name, MAC and MTU: {}", reason(e)))?;
    Ok(index)
}

/// Write back every recorded sysctl that differs, in the host's namespace;
/// those the kernel refused ("KEY=VALUE: why").
fn restore_sysctls(host: &File, iface: &HostInterface) -> Result<Vec<String>, String> {
    let sysctls = iface.sysctls.clone();
    namespace::run_in_file(host, move || {
        let mut failed = Vec::new();
        for (k, v) in &sysctls {
            if sysctl::read(k).is_ok_and(|now| now == *v) {
                continue;
            }
            if let Err(e) = sysctl::write(k, v) {
                failed.push(format!("{k}={v}: {e}"));
            }
        }
        Ok(failed)
    })
    .map_err(|e| format!("restoring its sysctls: {e}"))
}

/// One recorded address, with its scope, flags, broadcast, label and protocol;
/// one already there is fine.
async fn add_address(h: &Handle, index: u32, a: &SavedAddress) -> Result<(), String> {
    let mut req = h.address().add(index, a.addr.ip(), a.addr.prefix());
    let msg = req.message_mut();
    msg.header.scope = AddressScope::from(a.scope);
    // The flags one can ask for; the kernel sets the rest (permanent, tentative).
    const SETTABLE: u32 = 0x02 | 0x10 | 0x100 | 0x200 | 0x400;
    msg.attributes.retain(|at| {
        !matches!(
            at,
            AddressAttribute::Flags(_) | AddressAttribute::Broadcast(_)
        )
    });
    msg.attributes
        .push(AddressAttribute::Flags(AddressFlags::from_bits_retain(
            a.flags & SETTABLE,
        )));
    if let Some(b) = a.broadcast {
        msg.attributes.push(AddressAttribute::Broadcast(b));
    }
    if let Some(l) = &a.label {
        msg.attributes.push(AddressAttribute::Label(l.clone()));
    }
    if let Some(p) = a.protocol {
        msg.attributes
            .push(AddressAttribute::Protocol(AddressProtocol::from(p)));
    }
    match req.execute().await {
        Ok(()) => Ok(()),
        Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
        Err(e) => Err(format!("adding {}: {}", a.addr, reason(e))),
    }
}

fn parse_mac(s: &str) -> Option<Vec<u8>> {
    s.split(':')
        .map(|x| u8::from_str_radix(x, 16).ok())
        .collect()
}

/// One recorded route out of `index`; one already there is fine. An IPv6
/// gateway is reachable once the interface's prefix is, which can lag `up` by
/// a moment: a few tries.
async fn add_route(h: &Handle, index: u32, r: &SavedRoute) -> Result<(), String> {
    let m = route_message(index, r);
    let mut tries = 0;
    loop {
        match h.route().add(m.clone()).execute().await {
            Ok(()) => return Ok(()),
            Err(e) if errno(&e) == Some(libc::EEXIST) => return Ok(()),
            Err(_) if tries < 20 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(format!("adding route {r}: {}", reason(e))),
        }
    }
}

/// The recorded route as a main-table route message out of `index`.
fn route_message(index: u32, r: &SavedRoute) -> RouteMessage {
    let mut m = RouteMessage::default();
    let v6 = r.to.is_ipv6();
    m.header.address_family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.destination_prefix_length = r.to.prefix();
    m.header.tos = r.tos;
    m.header.table = RT_TABLE_MAIN as u8;
    m.header.protocol = RouteProtocol::from(r.protocol);
    m.header.scope = RouteScope::from(r.scope);
    m.header.kind = RouteType::from(r.kind);
    // RTNH_F_ONLINK is the flag one asks for; the others are the kernel's report.
    m.header.flags = RouteFlags::from_bits_retain(r.flags & 0x4);
    let addr = |ip: IpAddr| match ip {
        IpAddr::V4(x) => RouteAddress::Inet(x),
        IpAddr::V6(x) => RouteAddress::Inet6(x),
    };
    if r.to.prefix() != 0 {
        m.attributes
            .push(RouteAttribute::Destination(addr(r.to.network())));
    }
    if let Some(g) = r.via {
        m.attributes.push(RouteAttribute::Gateway(addr(g)));
    }
    if let Some(s) = r.src {
        m.attributes.push(RouteAttribute::PrefSource(addr(s)));
    }
    if let Some(p) = r.metric {
        m.attributes.push(RouteAttribute::Priority(p));
    }
    if let Some(p) = r.pref {
        m.attributes
            .push(RouteAttribute::Preference(RoutePreference::from(p)));
    }
    m.attributes.push(RouteAttribute::Oif(index));
    m
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_recorded_mac_parses_back_to_bytes() {
        assert_eq!(
            super::parse_mac("02:00:00:00:00:0a"),
            Some(vec![2, 0, 0, 0, 0, 10])
        );
    }
}
