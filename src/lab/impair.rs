//! `tunbench impair`: a running lab's link impairments changed in place,
//! without rebuilding the lab: the rate by tc on the veth ends, delay, jitter,
//! loss, duplication, reordering and the queue by new settings for the link's
//! relay process (which looks every second). A direction built without the
//! relay cannot get it at runtime. The lab's saved topology is not rewritten:
//! `down` and `up` start again from the file.

use crate::lab::Running;
use crate::plan::link::Way;
use crate::topology::impair::{Impairment, Shaping, shaping_lines};
use crate::topology::resolved::{Endpoint, Link};
use anyhow::{Context, Result};

/// Which traffic of a link, seen from the end the user named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Leaving the named end.
    Out,
    /// Arriving at the named end.
    In,
    Both,
}

/// The named end is no end of any link of the lab.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadEnd(String);

/// What to change on a link's directions.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// Some(Some(r)): shape to r; Some(None): remove the shaping.
    pub rate: Option<Option<u64>>,
    /// Relay settings given (rate unused), laid over the current ones.
    pub relay: Impairment,
    /// Start the relay settings from nothing (with `--clear`).
    pub clear_relay: bool,
}

impl Change {
    fn touches_relay(&self) -> bool {
        self.clear_relay || self.relay.needs_relay()
    }
}

/// Applies `change` to the directions `direction` names; returns a line per change.
pub fn apply(
    lab: &Running,
    end: &str,
    direction: Direction,
    change: &Change,
) -> Result<Vec<String>> {
    let (index, near, far) = named_link(lab, end)?;
    // Traffic is shaped where it is sent: leaving `near` on near's egress.
    let mut ends = Vec::new();
    if direction != Direction::In {
        ends.push((near, "leaving"));
    }
    if direction != Direction::Out {
        ends.push((far, "arriving at"));
    }
    let mut done = Vec::new();
    if change.touches_relay() {
        done.extend(change_relay(lab, end, index, &ends, change)?);
    }
    if let Some(rate) = change.rate {
        for (e, what) in ends {
            done.push(change_rate(lab, end, index, e, what, rate)?);
        }
    }
    Ok(done)
}

/// The link with the end `end` (NODE:IFACE): its index, the named end and
/// the other one. Links to external nodes are not the lab's to impair.
fn named_link<'a>(lab: &'a Running, end: &str) -> Result<(usize, &'a Endpoint, &'a Endpoint)> {
    let t = &lab.topology;
    let Some((node, iface)) = end.split_once(':') else {
        return Err(BadEnd(format!("\"{end}\" is not NODE:IFACE")).into());
    };
    let named = |e: &Endpoint| t.nodes[e.node].name == node && e.iface == iface;
    let Some((index, near, far)) = t.links.iter().enumerate().find_map(|(i, l)| {
        if named(&l.a) {
            Some((i, &l.a, &l.b))
        } else if named(&l.b) {
            Some((i, &l.b, &l.a))
        } else {
            None
        }
    }) else {
        return Err(BadEnd(format!(
            "lab {} has no link with an end {end}",
            lab.naming.lab
        ))
        .into());
    };
    if t.links[index].host.is_some() || t.links[index].is_external(t) {
        return Err(BadEnd(format!(
            "{end} is on a link to an external node; tunbench impairs only links inside the lab"
        ))
        .into());
    }
    Ok((index, near, far))
}

/// The direction of `link` that traffic sent from its end `e` travels: a
/// frame leaving `a` travels a_to_b.
fn way_from(link: &Link, e: &Endpoint) -> Way {
    if std::ptr::eq(e, &link.a) {
        Way::AToB
    } else {
        Way::BToA
    }
}

/// New relay settings (delay, loss and the like) for the directions sent
/// from `ends`; all or nothing: every direction is checked before any is
/// changed.
fn change_relay(
    lab: &Running,
    end: &str,
    index: usize,
    ends: &[(&Endpoint, &str)],
    change: &Change,
) -> Result<Vec<String>> {
    let link = &lab.topology.links[index];
    let ways: Vec<(Way, &str)> = ends
        .iter()
        .map(|(e, what)| (way_from(link, e), *what))
        .collect();
    for (way, what) in &ways {
        if !way.impairment(link).needs_relay() {
            return Err(BadEnd(format!(
                "{end}: traffic {what} it was built without the userspace link path, which delay, jitter, loss, duplicate, reorder and queue need; declare one of them for that direction in the topology (delay = \"0ms\" is enough) and bring the lab up again"
            ))
            .into());
        }
    }
    let mut done = Vec::new();
    for (way, what) in ways {
        let mut now = if change.clear_relay {
            Impairment::default()
        } else {
            crate::endpoint::relay::current(&lab.naming.lab, index, way, link)
        };
        let mut over = change.relay;
        over.rate = None;
        // The kernel shapes the rate, unless the relay paces it.
        if !now.relay_paces() {
            now.rate = None;
        }
        now.overlay(&over);
        write_settings(&lab.naming.lab, index, way, &now)?;
        done.push(format!("{end}: traffic {what} it: {}", describe(&now)));
    }
    Ok(done)
}

/// The rate of the direction sent from `e`: shaped by tc on its veth end,
/// or paced by the relay where the topology's framing is "none" and its
/// shaper TBF (Impairment::relay_paces). The direction's framing, queue and
/// shaper stay.
fn change_rate(
    lab: &Running,
    end: &str,
    index: usize,
    e: &Endpoint,
    what: &str,
    rate: Option<u64>,
) -> Result<String> {
    let t = &lab.topology;
    let n = &t.nodes[e.node].name;
    let ns = lab.naming.namespace(n);
    let link = &t.links[index];
    let way = way_from(link, e);
    let own = way.impairment(link);
    if own.relay_paces() {
        let mut now = crate::endpoint::relay::current(&lab.naming.lab, index, way, link);
        now.rate = rate;
        now.framing = own.framing;
        write_settings(&lab.naming.lab, index, way, &now)?;
        return Ok(match rate {
            Some(r) => format!("{end}: traffic {what} it paced to {r} bit/s (framing none)"),
            None => format!("{end}: traffic {what} it not shaped"),
        });
    }
    match rate {
        Some(r) => {
            let shaping = Shaping {
                dev: &e.iface,
                rate: r,
                framing: own.framing.unwrap_or_default(),
                mtu: link.mtu,
                queue_bytes: own.rate_queue_bytes(),
                shaper: own.rate_shaper.unwrap_or_default(),
            };
            netns::tc::run(&ns, &shaping_lines(&shaping, "replace"))
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("shaping {n}:{}", e.iface))?;
            Ok(format!("{end}: traffic {what} it shaped to {r} bit/s"))
        }
        None => {
            clear(&ns, &e.iface).with_context(|| format!("unshaping {n}:{}", e.iface))?;
            Ok(format!("{end}: traffic {what} it not shaped"))
        }
    }
}

/// Leaves a relay direction's new settings where its process looks.
fn write_settings(lab: &str, index: usize, way: Way, now: &Impairment) -> Result<()> {
    let path = crate::endpoint::relay::settings_path(lab, index, way);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string(now)?)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))
}

/// "delay 20 ms, loss 1 %", or "no delay, loss or the like".
fn describe(i: &Impairment) -> String {
    let mut parts = Vec::new();
    if let Some(d) = i.delay_us.filter(|d| *d > 0) {
        parts.push(format!("delay {} ms", d as f64 / 1000.0));
    }
    if let Some(d) = i.jitter_us.filter(|d| *d > 0) {
        parts.push(format!("jitter {} ms", d as f64 / 1000.0));
    }
    for (name, v) in [
        ("loss", i.loss),
        ("duplicate", i.duplicate),
        ("reorder", i.reorder),
    ] {
        if let Some(v) = v.filter(|v| *v > 0.0) {
            parts.push(format!("{name} {v} %"));
        }
    }
    if let Some(q) = i.queue_packets {
        parts.push(format!("queue {q} packets"));
    }
    if let Some(q) = i.queue_bytes {
        parts.push(format!("queue {q} bytes"));
    }
    if parts.is_empty() {
        "no delay, loss or the like".into()
    } else {
        parts.join(", ")
    }
}

/// Removes the root qdisc; one that was never there is no error.
fn clear(ns: &str, dev: &str) -> Result<()> {
    match netns::tc::run(ns, &format!("qdisc del dev {dev} root\n")) {
        Ok(()) => Ok(()),
        Err(e) if e.contains("handle of zero") || e.contains("No such file") => Ok(()),
        Err(e) => Err(anyhow::Error::msg(e)),
    }
}
