//! The way a cell's data takes through the lab, as both limits follow it:
//! the routing model's trace, turned around for a download.

use crate::routing::{Arrival, Hop, Router};
use crate::topology::resolved::Topology;
use crate::vocab::Direction;
use std::net::IpAddr;

/// The way a cell's data takes between node `from` and address `dst`, and
/// the address it goes to: an upload from `from` to `dst`, a download from
/// `dst`'s node back to `from`'s source address. None: routing finds no way.
pub(super) fn data_path(
    t: &Topology,
    router: &Router,
    from: usize,
    dst: IpAddr,
    direction: Direction,
) -> Option<(Vec<Hop>, IpAddr)> {
    let forward = router.trace(from, dst).ok()?;
    match direction {
        Direction::Sender => Some((forward, dst)),
        Direction::Receiver => {
            let src = router.source_for(from, dst)?;
            let to = forward.last()?.node;
            Some((back(t, router, &forward, to, src), src))
        }
    }
}

/// The way a download's data takes from `to` back to `src`: as routing has
/// it, except past a softwire's NAT44 (the routing model knows the replies'
/// way only as the forward one reversed, up to the B4).
fn back(t: &Topology, router: &Router, forward: &[Hop], to: usize, src: IpAddr) -> Vec<Hop> {
    let natted = forward.iter().any(|h| match h.by {
        Some(Arrival::Tunnel { tunnel, .. }) => t.tunnels[tunnel].overlay().is_none(),
        _ => false,
    });
    if !natted {
        if let Ok(hops) = router.trace(to, src) {
            return hops;
        }
    }
    let mut hops: Vec<Hop> = forward
        .iter()
        .rev()
        .map(|h| Hop {
            node: h.node,
            by: None,
        })
        .collect();
    // The arrival at each node is the forward one of the node after it,
    // turned around.
    for (i, h) in forward
        .iter()
        .rev()
        .enumerate()
        .take(forward.len().saturating_sub(1))
    {
        hops[i + 1].by = h.by.map(|b| match b {
            Arrival::Link => Arrival::Link,
            Arrival::Tunnel {
                tunnel,
                outer_src,
                outer_dst,
            } => Arrival::Tunnel {
                tunnel,
                outer_src: outer_dst,
                outer_dst: outer_src,
            },
        });
    }
    // Out of the last tunnel, the node routes the rest on its own.
    if let Some(i) = hops
        .iter()
        .rposition(|h| matches!(h.by, Some(Arrival::Tunnel { .. })))
    {
        if let Ok(rest) = router.trace(hops[i].node, src) {
            hops.truncate(i + 1);
            hops.extend(rest.into_iter().skip(1));
        }
    }
    hops
}
