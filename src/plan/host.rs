//! The kernel objects of a host's profile: its UDP receive limits, an nftables
//! policer on the input hook of the host's own namespace (it goes with the
//! namespace, so nothing else needs undoing).
//!
//! The policer meters IP packets (nftables counts `skb->len` at the input hook,
//! from the IP header on), the unit the host model's limits are in. nftables'
//! byte-mode `limit` keeps a bucket of one second of its rate plus the burst
//! (the kernel sizes it as `unit * (rate + burst) / rate`, and the shortest
//! unit is a second): after an idle second, about one second's worth of the
//! rate passes before the limit bites. Measured on this kernel: 1 s at twice a
//! 40 Mbit/s limit dropped 1.3 %, a 3 s test received 34 % more than the limit,
//! and after the first second the rate holds to within 2 %.

use crate::topology::Topology;
use crate::topology::profile::HostModel;
use netns::Op;
use std::fmt::Write;

/// Not `tunbench_…`: a DS-Lite endpoint's tables are `tunbench_TUNNEL`, and a
/// tunnel may have any name; theirs never hold a `-`.
pub const TABLE: &str = "tunbench-host";

/// The smallest burst: a few full-size GSO packets' worth.
const MIN_BURST: u64 = 64 * 1024;

pub fn ops(t: &Topology, node: usize, ns: &str) -> Vec<Op> {
    match &t.nodes[node].host_model {
        Some(h) if h.udp_receive_ipv4_bps.is_some() || h.udp_receive_ipv6_bps.is_some() => {
            vec![Op::Nftables {
                ns: ns.into(),
                ruleset: ruleset(h),
            }]
        }
        _ => Vec::new(),
    }
}

/// `limit rate over R bytes/second burst B bytes`: R from bit/s of IP
/// packets; B 5 ms of the rate, at least 64 KB (a GSO packet's worth), as the
/// link shaper's burst: nftables adds it to its one-second bucket.
pub fn limit(bps: u64) -> String {
    let bytes = bps / 8;
    let burst = (bytes / 200).max(MIN_BURST);
    format!("limit rate over {bytes} bytes/second burst {burst} bytes")
}

fn ruleset(h: &HostModel) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "table inet {TABLE} {{");
    let _ = writeln!(
        s,
        "  chain udp_receive {{\n    type filter hook input priority filter; policy accept;"
    );
    for (family, bps) in [
        ("ipv4", h.udp_receive_ipv4_bps),
        ("ipv6", h.udp_receive_ipv6_bps),
    ] {
        if let Some(bps) = bps {
            let _ = writeln!(
                s,
                "    meta nfproto {family} meta l4proto udp {} drop",
                limit(bps)
            );
        }
    }
    let _ = writeln!(s, "  }}\n}}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_gets_its_own_policer_in_bytes() {
        let h = HostModel {
            profile: "seed-server".into(),
            description: None,
            udp_receive_ipv4_bps: Some(318_000_000),
            udp_receive_ipv6_bps: None,
        };
        assert_eq!(
            ruleset(&h),
            "table inet tunbench-host {\n  chain udp_receive {\n    type filter hook input priority filter; policy accept;\n    meta nfproto ipv4 meta l4proto udp limit rate over 39750000 bytes/second burst 198750 bytes drop\n  }\n}\n"
        );
        // A slow limit still lets a burst of GSO-sized packets through.
        assert_eq!(
            limit(40_000_000),
            "limit rate over 5000000 bytes/second burst 65536 bytes"
        );
    }
}
