//! `tunbench status`: every lab (or one), its nodes, devices, tunnels and
//! datapaths, as text or JSON; exit 1 when a lab's record cannot be read.

use super::runtime;
use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    pub lab: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn status(a: StatusArgs) -> Result<i32> {
    let StatusArgs { lab: which, json } = a;
    let named = which.is_some();
    let labs = match which {
        Some(l) => vec![l],
        None => netns::LabState::lab_names(),
    };
    let rt = runtime()?;
    let mut out = Vec::new();
    // One lab's unreadable record does not hide the others: each is reported, and
    // the exit code says some were.
    let mut unreadable = 0;
    for l in &labs {
        let state = match netns::LabState::load(l) {
            Ok(Some(s)) => s,
            Ok(None) if named => anyhow::bail!("no lab named {l} is up"),
            // A directory without a record yet: an `up` that is just starting.
            Ok(None) => continue,
            Err(e) if named => return Err(e.into()),
            Err(e) => {
                unreadable += 1;
                eprintln!("tunbench: lab {l}: unreadable record: {e}");
                continue;
            }
        };
        let mut nodes = Vec::new();
        for n in &state.nodes {
            let devices = if netns::namespace::exists(&n.namespace) {
                rt.block_on(netns::inspect::devices(&n.namespace))
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            nodes.push(serde_json::json!({ "node": n.node, "namespace": n.namespace, "kind": n.kind, "present": netns::namespace::exists(&n.namespace), "devices": devices }));
        }
        let running = crate::lab::find(l).ok();
        // The record says "up" once the namespaces are built; whether the
        // datapaths run is asked of /proc now.
        let (health, status_word) = match &running {
            Some(r) => {
                let h = crate::lab::liveness::health(l, &r.topology, &state);
                let w = crate::lab::liveness::lab_status(l, &state, &h);
                (h, serde_json::json!(w))
            }
            None => (Vec::new(), serde_json::json!(state.status)),
        };
        let datapaths = match &running {
            Some(_) => health.iter().map(|h| datapath_entry(l, h)).collect(),
            None => crate::lab::datapath::stats_of(l),
        };
        // A dead endpoint's peers or SAs are its last words, not the present.
        let dead = |tunnel: &str, node: &str| {
            health.iter().any(|h| {
                matches!(h.liveness, crate::lab::liveness::Liveness::Dead(_))
                    && h.node == node
                    && h.job == crate::lab::datapath::Job::Tunnel(tunnel.to_string())
            })
        };
        // Interfaces of the machine the lab took, and the external devices
        // it reaches through them (nothing of theirs runs here).
        let host_interfaces: Vec<String> = state.host_links.iter().map(|h| h.describe()).collect();
        let mut wireguard = crate::endpoint::wireguard::peers_of(l);
        wireguard.retain(|f| !dead(&f.tunnel, &f.node));
        let mut ikev2 = crate::endpoint::ikev2::sa_files_of(l);
        ikev2.retain(|f| !dead(&f.tunnel, &f.node));
        let tunnels: Vec<serde_json::Value> = running
            .as_ref()
            .map(|r| {
                r.topology
                    .tunnels
                    .iter()
                    .map(|t| serde_json::json!({ "name": t.name, "sizes": t.sizes() }))
                    .collect()
            })
            .unwrap_or_default();
        out.push(serde_json::json!({ "lab": l, "status": status_word, "topology": state.topology, "created": state.created, "nodes": nodes, "processes": state.processes, "tunnels": tunnels, "datapaths": datapaths, "wireguard": wireguard, "ikev2": ikev2, "host_interfaces": host_interfaces }));
    }
    let code = if unreadable > 0 { 1 } else { 0 };
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(code);
    }
    if out.is_empty() && unreadable == 0 {
        println!("no labs are up");
    }
    for l in &out {
        println!(
            "lab {} ({}), {} nodes, from {}",
            l["lab"].as_str().unwrap_or(""),
            l["status"].as_str().unwrap_or(""),
            l["nodes"].as_array().map(|a| a.len()).unwrap_or(0),
            l["topology"].as_str().unwrap_or("?")
        );
        for h in l["host_interfaces"].as_array().into_iter().flatten() {
            println!("  host interface {}", h.as_str().unwrap_or(""));
        }
        for n in l["nodes"].as_array().into_iter().flatten() {
            let present = if n["present"].as_bool() == Some(true) {
                ""
            } else {
                "  (namespace missing)"
            };
            println!(
                "  {} [{}] ns {}{present}",
                n["node"].as_str().unwrap_or(""),
                n["kind"].as_str().unwrap_or(""),
                n["namespace"].as_str().unwrap_or("")
            );
            for d in n["devices"].as_array().into_iter().flatten() {
                let addrs: Vec<&str> = d["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .filter(|a| !a.starts_with("fe80:") && *a != "127.0.0.1/8" && *a != "::1/128")
                    .collect();
                let master = d["master"]
                    .as_str()
                    .map(|m| format!(" master {m}"))
                    .unwrap_or_default();
                println!(
                    "    {:<15} {:<8} {:<14} mtu {:<5}{master} {}",
                    d["name"].as_str().unwrap_or(""),
                    d["kind"].as_str().unwrap_or(""),
                    format!(
                        "{}{}",
                        if d["up"].as_bool() == Some(true) {
                            "UP/"
                        } else {
                            "DOWN/"
                        },
                        d["state"].as_str().unwrap_or("")
                    ),
                    d["mtu"],
                    addrs.join(" ")
                );
            }
        }
        if let Ok(r) = crate::lab::find(l["lab"].as_str().unwrap_or("")) {
            for t in &r.topology.tunnels {
                let s = t.sizes();
                println!(
                    "  tunnel {} ({}): {}",
                    t.name,
                    s.encapsulation,
                    s.describe()
                );
            }
        }
        for d in l["datapaths"].as_array().into_iter().flatten() {
            let pid = d["pid"]
                .as_i64()
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            match d["state"].as_str() {
                Some("dead") => println!(
                    "  {}{pid} is dead: {}",
                    d["datapath"].as_str().unwrap_or("?"),
                    d["reason"].as_str().unwrap_or("?")
                ),
                Some("starting") => println!(
                    "  {}{pid} is starting",
                    d["datapath"].as_str().unwrap_or("?")
                ),
                _ => println!("  {}", crate::lab::datapath::describe(d)),
            }
        }
        for w in l["wireguard"].as_array().into_iter().flatten() {
            if let Ok(f) = serde_json::from_value(w.clone()) {
                print!("{}", crate::endpoint::wireguard::describe(&f));
            }
        }
        for s in l["ikev2"].as_array().into_iter().flatten() {
            if let Ok(f) = serde_json::from_value(s.clone()) {
                print!("{}", crate::endpoint::ikev2::describe(&f));
            }
        }
    }
    Ok(code)
}

/// One datapath in `status --json`: a running one's counters (from its stats
/// file), a dead one's reason and never its last counters.
fn datapath_entry(lab: &str, h: &crate::lab::liveness::DatapathHealth) -> serde_json::Value {
    use crate::lab::liveness::Liveness;
    let mut v = serde_json::json!({
        "datapath": h.job.label(&h.node),
        "what": h.job.describe(&h.node),
        "node": h.node,
        "pid": h.pid,
    });
    if let crate::lab::datapath::Job::Tunnel(t) = &h.job {
        v["tunnel"] = serde_json::json!(t);
    }
    match &h.liveness {
        Liveness::Running => {
            let stats = std::fs::read(crate::lab::datapath::stats_path(lab, &h.job, &h.node))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
            if let Some(serde_json::Value::Object(m)) = stats {
                v = serde_json::Value::Object(m);
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
