//! `tunbench status`: every lab (or one), its nodes, devices, tunnels and
//! datapaths, as text or JSON; exit 1 when a lab's record cannot be read.

use super::runtime;
use anyhow::Result;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    pub lab: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn status(a: StatusArgs) -> Result<i32> {
    let StatusArgs { lab: which, json } = a;
    let gathered = runtime()?.block_on(crate::lab::status::gather(which))?;
    for (l, e) in &gathered.unreadable {
        eprintln!("tunbench: lab {l}: unreadable record: {e}");
    }
    let code = if gathered.unreadable.is_empty() { 0 } else { 1 };
    if json {
        println!("{}", serde_json::to_string_pretty(&gathered.labs)?);
        return Ok(code);
    }
    if gathered.labs.is_empty() && gathered.unreadable.is_empty() {
        println!("no labs are up");
    }
    for l in &gathered.labs {
        print_lab(l);
    }
    Ok(code)
}

fn list(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// One lab's entry as text.
fn print_lab(l: &Value) {
    println!(
        "lab {} ({}), {} nodes{}, from {}",
        l["lab"].as_str().unwrap_or(""),
        l["status"].as_str().unwrap_or(""),
        l["nodes"].as_array().map(|a| a.len()).unwrap_or(0),
        l["host"]
            .as_str()
            .map(|h| format!(", host {h}'s part"))
            .unwrap_or_default(),
        l["topology"].as_str().unwrap_or("?")
    );
    for h in list(&l["host_interfaces"]) {
        println!("  host interface {}", h.as_str().unwrap_or(""));
    }
    for n in list(&l["nodes"]) {
        print_node(n);
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
    for d in list(&l["datapaths"]) {
        print_datapath(d);
    }
    for w in list(&l["wireguard"]) {
        if let Ok(f) = serde_json::from_value(w.clone()) {
            print!("{}", crate::endpoint::wireguard::describe(&f));
        }
    }
    for s in list(&l["ikev2"]) {
        if let Ok(f) = serde_json::from_value(s.clone()) {
            print!("{}", crate::endpoint::ikev2::describe(&f));
        }
    }
}

/// A node and its devices, their state, MTU and addresses (not the
/// link-local or loopback ones).
fn print_node(n: &Value) {
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
    for d in list(&n["devices"]) {
        let addrs: Vec<&str> = list(&d["addresses"])
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

/// A datapath's line: its counters, or that it is dead or starting.
fn print_datapath(d: &Value) {
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
