//! What several modules read from netlink: words for its errors, and the
//! fields of its messages they share.

use ipnetwork::IpNetwork;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use std::io;

/// Words for a netlink error: "File exists (os error 17)".
pub(crate) fn reason(e: rtnetlink::Error) -> String {
    match e {
        rtnetlink::Error::NetlinkError(m) => match m.code {
            Some(c) => io::Error::from_raw_os_error(-c.get()).to_string(),
            None => "unexpected acknowledgement".into(),
        },
        other => other.to_string(),
    }
}

/// The errno of a netlink error, if it is one.
pub(crate) fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(m) => m.code.map(|c| -c.get()),
        _ => None,
    }
}

/// A link message's device name.
pub(crate) fn link_name(l: &LinkMessage) -> Option<&str> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(n) => Some(n.as_str()),
        _ => None,
    })
}

/// An address message's own address: IFA_LOCAL where present (IFA_ADDRESS is
/// the peer on point-to-point links), with its prefix length.
pub(crate) fn address_of(a: &AddressMessage) -> Option<IpNetwork> {
    let mut ip = None;
    for at in &a.attributes {
        match at {
            AddressAttribute::Local(x) => ip = Some(*x),
            AddressAttribute::Address(x) if ip.is_none() => ip = Some(*x),
            _ => {}
        }
    }
    IpNetwork::new(ip?, a.header.prefix_len).ok()
}
