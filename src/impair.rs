//! `tunbench impair`: a running lab's link impairments changed in place (tc on
//! the veth ends), without rebuilding the lab. The lab's saved topology is not
//! rewritten: `down` and `up` start again from the file.

use crate::lab::Running;
use crate::topology::impair::tbf_replace_line;
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

/// Sets (`rate`) or removes (None) the shaping; returns a line per change.
pub fn apply(
    lab: &Running,
    end: &str,
    direction: Direction,
    rate: Option<u64>,
) -> Result<Vec<String>> {
    let t = &lab.topology;
    let Some((node, iface)) = end.split_once(':') else {
        return Err(BadEnd(format!("\"{end}\" is not NODE:IFACE")).into());
    };
    let named =
        |e: &crate::topology::model::Endpoint| t.nodes[e.node].name == node && e.iface == iface;
    let Some((near, far)) = t.links.iter().find_map(|l| {
        if named(&l.a) {
            Some((&l.a, &l.b))
        } else if named(&l.b) {
            Some((&l.b, &l.a))
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
    // Traffic is shaped where it is sent: leaving `near` on near's egress.
    let mut ends = Vec::new();
    if direction != Direction::In {
        ends.push((near, "leaving"));
    }
    if direction != Direction::Out {
        ends.push((far, "arriving at"));
    }
    let mut done = Vec::new();
    for (e, what) in ends {
        let n = &t.nodes[e.node].name;
        let ns = lab.naming.namespace(n);
        match rate {
            Some(r) => {
                netns::tc::run(&ns, &(tbf_replace_line(&e.iface, r) + "\n"))
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("shaping {n}:{}", e.iface))?;
                done.push(format!("{end}: traffic {what} it shaped to {r} bit/s"));
            }
            None => {
                clear(&ns, &e.iface).with_context(|| format!("unshaping {n}:{}", e.iface))?;
                done.push(format!("{end}: traffic {what} it not shaped"));
            }
        }
    }
    Ok(done)
}

/// Removes the root qdisc; one that was never there is no error.
fn clear(ns: &str, dev: &str) -> Result<()> {
    match netns::tc::run(ns, &format!("qdisc del dev {dev} root\n")) {
        Ok(()) => Ok(()),
        Err(e) if e.contains("handle of zero") || e.contains("No such file") => Ok(()),
        Err(e) => Err(anyhow::Error::msg(e)),
    }
}
