//! Scenarios that resolve to the same lab on this machine: built and measured
//! once. A scenario is a variant of the file; once resolved for this kernel
//! (a DS-Lite end's `datapath = "auto"` falls back to tunbench's own where
//! the kernel lacks seg6) two of them may ask for exactly the same
//! namespaces, links, addresses, routes and datapaths. Measuring the second
//! would repeat the first's figures for nothing.

use crate::topology::Topology;
use crate::topology::scenario::Scenario;
use serde_json::Value;

/// One lab to build: the scenario it is built as, and the scenarios that
/// resolve to the same lab and take its figures (indices into the list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SameLab {
    pub built_as: usize,
    pub also: Vec<usize>,
}

/// The scenarios grouped by the lab they resolve to, in the order of their
/// first scenario. A scenario with a manual step is a lab of its own: what
/// is done by hand is not in the file.
pub fn group(scenarios: &[Scenario]) -> Vec<SameLab> {
    let prints: Vec<Value> = scenarios.iter().map(|s| lab_print(&s.topology)).collect();
    let mut groups: Vec<SameLab> = Vec::new();
    for (i, print) in prints.iter().enumerate() {
        let alike = |g: &&mut SameLab| {
            scenarios[i].manual.is_none()
                && scenarios[g.built_as].manual.is_none()
                && &prints[g.built_as] == print
        };
        match groups.iter_mut().find(alike) {
            Some(g) => g.also.push(i),
            None => groups.push(SameLab {
                built_as: i,
                also: Vec::new(),
            }),
        }
    }
    groups
}

/// What `up` builds a lab from: the resolved topology (its plan and its
/// datapaths both follow from it), without what is measured or checked in
/// it, what only explains it (each `description`) and how a datapath was
/// chosen (`auto`: the resolved `datapath` beside it is what runs).
fn lab_print(t: &Topology) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        for key in ["measurements", "assertions", "reference"] {
            m.remove(key);
        }
    }
    strip(&mut v);
    v
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("description");
            m.remove("auto");
            m.values_mut().for_each(strip);
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

/// Why `also` carries `built_as`'s figures, for the results' notes.
pub fn note(built_as: &str, also: &str) -> String {
    format!(
        "scenario {also} builds the same lab as scenario {built_as} on this machine (the same namespaces, links, addresses, routes and datapaths once both are resolved for this kernel), so tunbench built and measured it once: the figures of {also} are those of {built_as}, shown under both names."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::kernel::KernelFacts;
    use crate::topology::scenario::scenarios_str;
    use std::path::Path;

    const FILE: &str = r#"
name = "same"
[nodes.a]
kind = "host"
[nodes.r]
kind = "router"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.80.2/24" }
b = { port = "r:lan", ipv4 = "198.18.80.1/24" }
[[links]]
a = { port = "r:wan", ipv4 = "198.18.81.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.81.2/24" }
[scenarios.kernel]
description = "kernel forwarding"
[scenarios.kernel-again]
description = "said differently, built the same"
[scenarios.slow]
nodes.r.datapath = "userspace"
[scenarios.by-hand]
manual = "set the router's fan to full speed"
"#;

    fn scenarios() -> Vec<Scenario> {
        scenarios_str(FILE, Path::new("same.toml"), KernelFacts::FULL).unwrap()
    }

    #[test]
    fn scenarios_that_differ_only_in_words_share_a_lab_and_others_do_not() {
        let s = scenarios();
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
        let groups = group(&s);
        assert_eq!(groups.len(), 3, "{groups:?}");
        let by_hand = groups.iter().find(|g| g.built_as == at("by-hand"));
        assert!(
            by_hand.is_some_and(|g| g.also.is_empty()),
            "a step by hand: its own lab"
        );
        let kernel = groups.iter().find(|g| g.built_as == at("kernel")).unwrap();
        assert_eq!(kernel.also, vec![at("kernel-again")]);
        let slow = groups.iter().find(|g| g.built_as == at("slow")).unwrap();
        assert!(slow.also.is_empty(), "a datapath of its own: its own lab");
    }

    #[test]
    fn the_home_softwire_scenario_is_the_fast_lab_only_where_the_kernel_lacks_seg6() {
        let text = std::fs::read_to_string("topologies/nvr500-home.toml").unwrap();
        let file = Path::new("topologies/nvr500-home.toml");
        let grouped = |kernel| {
            let s = scenarios_str(&text, file, kernel).unwrap();
            let names: Vec<String> = s.iter().map(|s| s.name.clone()).collect();
            group(&s)
                .into_iter()
                .map(|g| {
                    let mut v = vec![names[g.built_as].clone()];
                    v.extend(g.also.iter().map(|&i| names[i].clone()));
                    v
                })
                .collect::<Vec<_>>()
        };
        let no_seg6 = KernelFacts {
            seg6_lwtunnel: false,
            ..KernelFacts::FULL
        };
        assert_eq!(
            grouped(no_seg6),
            [
                vec!["fast", "softwire-userspace"],
                vec!["none"],
                vec!["normal"]
            ]
        );
        assert_eq!(grouped(KernelFacts::FULL).len(), 4, "four labs with seg6");
    }
}
