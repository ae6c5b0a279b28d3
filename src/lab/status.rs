//! What `tunbench status` reports of each lab, gathered as JSON values (the
//! `--json` form; the text form is printed from them): its record, nodes and
//! their devices, whether its datapaths run, tunnels, WireGuard peers and
//! IKEv2 SAs, and the host interfaces it took.

use crate::lab::datapath::{self, Job};
use crate::lab::liveness::{self, DatapathHealth, Liveness};
use anyhow::{Result, bail};
use netns::LabState;
use serde_json::{Value, json};

/// Every lab asked for, and the records that could not be read.
pub struct Gathered {
    pub labs: Vec<Value>,
    /// (lab, why) for each lab whose record is unreadable.
    pub unreadable: Vec<(String, String)>,
}

/// The lab `which` names (an error when it is not up or its record is
/// unreadable), or every lab (one's unreadable record does not hide the
/// others).
pub async fn gather(which: Option<String>) -> Result<Gathered> {
    let named = which.is_some();
    let names = match which {
        Some(l) => vec![l],
        None => LabState::lab_names(),
    };
    let mut out = Gathered {
        labs: Vec::new(),
        unreadable: Vec::new(),
    };
    for l in &names {
        let state = match LabState::load(l) {
            Ok(Some(s)) => s,
            Ok(None) if named => bail!("no lab named {l} is up"),
            // A directory without a record yet: an `up` that is just starting.
            Ok(None) => continue,
            Err(e) if named => return Err(e.into()),
            Err(e) => {
                out.unreadable.push((l.clone(), e.to_string()));
                continue;
            }
        };
        out.labs.push(lab(l, &state).await);
    }
    Ok(out)
}

/// One lab's entry.
async fn lab(l: &str, state: &LabState) -> Value {
    let nodes = nodes(state).await;
    let running = crate::lab::find(l).ok();
    // The record says "up" once the namespaces are built; whether the
    // datapaths run is asked of /proc now.
    let (health, status_word) = match &running {
        Some(r) => {
            let h = liveness::health(l, &r.topology, state);
            let w = liveness::lab_status(l, state, &h);
            (h, json!(w))
        }
        None => (Vec::new(), json!(state.status)),
    };
    let datapaths: Vec<Value> = match &running {
        Some(_) => health.iter().map(|h| datapath_entry(l, h)).collect(),
        None => datapath::stats_of(l),
    };
    // A dead endpoint's peers or SAs are its last words, not the present.
    let dead = |tunnel: &str, node: &str| {
        health.iter().any(|h| {
            matches!(h.liveness, Liveness::Dead(_))
                && h.node == node
                && h.job == Job::Tunnel(tunnel.to_string())
        })
    };
    // Interfaces of the machine the lab took, and the external devices
    // it reaches through them (nothing of theirs runs here).
    let host_interfaces: Vec<String> = state.host_links.iter().map(|h| h.describe()).collect();
    let mut wireguard = crate::endpoint::wireguard::peers_of(l);
    wireguard.retain(|f| !dead(&f.tunnel, &f.node));
    let mut ikev2 = crate::endpoint::ikev2::sa_files_of(l);
    ikev2.retain(|f| !dead(&f.tunnel, &f.node));
    let tunnels: Vec<Value> = running
        .as_ref()
        .map(|r| {
            r.topology
                .tunnels
                .iter()
                .map(|t| json!({ "name": t.name, "sizes": t.sizes() }))
                .collect()
        })
        .unwrap_or_default();
    json!({ "lab": l, "host": state.host, "status": status_word, "topology": state.topology, "created": state.created, "nodes": nodes, "processes": state.processes, "tunnels": tunnels, "datapaths": datapaths, "wireguard": wireguard, "ikev2": ikev2, "host_interfaces": host_interfaces })
}

/// Each node of the record, whether its namespace is there, and its devices.
async fn nodes(state: &LabState) -> Vec<Value> {
    let mut nodes = Vec::new();
    for n in &state.nodes {
        let devices = if netns::namespace::exists(&n.namespace) {
            netns::inspect::devices(&n.namespace)
                .await
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        nodes.push(json!({ "node": n.node, "namespace": n.namespace, "kind": n.kind, "present": netns::namespace::exists(&n.namespace), "devices": devices }));
    }
    nodes
}

/// One datapath: a running one's counters (from its stats file), a dead
/// one's reason and never its last counters.
fn datapath_entry(lab: &str, h: &DatapathHealth) -> Value {
    let mut v = json!({
        "datapath": h.job.label(&h.node),
        "what": h.job.describe(&h.node),
        "node": h.node,
        "pid": h.pid,
    });
    if let Job::Tunnel(t) = &h.job {
        v["tunnel"] = json!(t);
    }
    match &h.liveness {
        Liveness::Running => {
            let stats = std::fs::read(datapath::stats_path(lab, &h.job, &h.node))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            if let Some(Value::Object(m)) = stats {
                v = Value::Object(m);
            }
            v["datapath"] = h.job.label(&h.node).into();
            v["state"] = "running".into();
        }
        Liveness::Starting => v["state"] = "starting".into(),
        Liveness::Dead(reason) => {
            v["state"] = "dead".into();
            v["reason"] = reason.as_str().into();
        }
    }
    v
}
