//! Kernel features whose netlink formats are their tools' own (nftables,
//! tc classifiers and qdiscs), tried through the same programs a lab runs
//! (`nft -f -`, `tc -batch -`) on input shaped like a lab's.

use super::Found;
use super::sandbox::{PROBE_A, PROBE_B, in_throwaway_namespace, veth_pair, with_netlink};
use crate::tool::{Tool, ToolFailure};

/// A NAT chain as the DS-Lite AFTR's NAT44 has one (an inet table), with
/// both source NAT forms.
const NAT_RULESET: &str = "table inet tunbench_probe {
  chain nat44 {
    type nat hook postrouting priority srcnat; policy accept;
    meta nfproto ipv4 ip saddr 198.18.0.0/24 snat ip to 198.18.1.1
    meta nfproto ipv4 ip saddr 198.18.2.0/24 masquerade
  }
}
";

/// A rate on a veth end as `tunbench` shapes one (topology::impair): a TBF
/// charging framing bytes, over a TBF that meters single frames.
fn tbf_batch(dev: &str) -> String {
    format!(
        "qdisc add dev {dev} root handle 1: tbf rate 1000000000bit burst 1250000 latency 50ms overhead 24 mpu 84\n\
         qdisc add dev {dev} parent 1:1 handle 10: tbf rate 4000gbit burst 1518 limit 7500000\n"
    )
}

/// A rate on a veth end as `shaper = "cake"` shapes one: CAKE charging each
/// IP packet the framing's bytes, GSO packets split into their frames.
fn cake_batch(dev: &str) -> String {
    format!(
        "qdisc add dev {dev} root handle 1: cake bandwidth 100000000bit overhead 38 mpu 84 split-gso\n"
    )
}

/// Every frame arriving on `from` leaves through `to`, as an impaired link's
/// relay and a userspace router's slow path send them.
fn redirect_batch(from: &str, to: &str) -> String {
    format!(
        "qdisc add dev {from} clsact\n\
         filter add dev {from} ingress protocol all prio 1 u32 match u32 0 0 action mirred egress redirect dev {to}\n"
    )
}

pub(super) fn probe_nft_nat() -> Found {
    in_throwaway_namespace(|| verdict(crate::nft::NFT, NAT_RULESET))
}

pub(super) fn probe_tbf() -> Found {
    on_veth(crate::tc::TC, tbf_batch(PROBE_A))
}

pub(super) fn probe_cake() -> Found {
    on_veth(crate::tc::TC, cake_batch(PROBE_A))
}

pub(super) fn probe_redirect() -> Found {
    on_veth(crate::tc::TC, redirect_batch(PROBE_A, PROBE_B))
}

/// `tool` given `text` once a veth pair exists.
fn on_veth(tool: Tool, text: String) -> Found {
    in_throwaway_namespace(move || {
        let made = with_netlink(|h| async move {
            match veth_pair(&h).await {
                Ok(()) => Found::Present,
                Err(f) => f,
            }
        });
        match made {
            Found::Present => verdict(tool, &text),
            other => other,
        }
    })
}

/// A tool that refuses its input says the kernel lacks what it names; one that
/// cannot run says nothing about the kernel.
fn verdict(tool: Tool, text: &str) -> Found {
    match tool.run_here(text) {
        Ok(()) => Found::Present,
        Err(ToolFailure::Refused(m)) => Found::Absent(m),
        Err(f) => Found::Unknown(f.to_string()),
    }
}
