//! The checks on a plan's host links, pure: on what `preflight` read of the
//! host and of the other labs' records.

use crate::features::{Feature, needed_to_attach};
use crate::ops::HostAttach;
use crate::state::{HostLinkRecord, HostNetns};
use ipnetwork::IpNetwork;

/// What the host's namespace holds, as far as the checks need it.
#[derive(Debug, Clone, Default)]
pub struct HostView {
    pub interfaces: Vec<HostIf>,
    /// (ifindex, address) of addresses of global scope.
    pub global: Vec<(u32, IpNetwork)>,
    /// (output interfaces, description) of default routes, in any table.
    pub defaults: Vec<(Vec<u32>, String)>,
}

/// One interface of the host.
#[derive(Debug, Clone, Default)]
pub struct HostIf {
    pub index: u32,
    pub name: String,
    /// Whether the kernel lets it change namespace (not lo, not netns-immutable).
    pub movable: bool,
    /// The bridge or bond it is a port of.
    pub master: Option<String>,
}

/// Another lab's host link, and the host namespace that lab was built in.
#[derive(Debug, Clone)]
pub struct OtherLab {
    pub lab: String,
    pub host_netns: Option<HostNetns>,
    pub link: HostLinkRecord,
}

/// Every problem of every link, each naming the interface and the node's
/// device: "enp3s0 (for l-a:eth0, moved): why".
pub fn check(
    links: &[HostLinkRecord],
    view: &HostView,
    others: &[OtherLab],
    me: &HostNetns,
    force: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (k, l) in links.iter().enumerate() {
        let why = link_problems(l, &links[..k], view, others, me, force);
        problems.extend(why.into_iter().map(|why| format!("{}: {why}", who(l))));
    }
    problems
}

fn who(l: &HostLinkRecord) -> String {
    format!("{} (for {}:{}, {})", l.host, l.ns, l.name, l.attach)
}

/// The links whose device this kernel cannot make, `absent` saying which
/// features it lacks, each named as `check` names it.
pub fn lacking_drivers(links: &[HostLinkRecord], absent: &dyn Fn(Feature) -> bool) -> Vec<String> {
    links
        .iter()
        .filter_map(|l| {
            let (feature, instead) = needed_to_attach(l.attach)?;
            absent(feature).then(|| format!("{}: {}", who(l), feature.refusal(instead)))
        })
        .collect()
}

/// The problems of one link, `earlier` being the plan's links before it.
fn link_problems(
    l: &HostLinkRecord,
    earlier: &[HostLinkRecord],
    view: &HostView,
    others: &[OtherLab],
    me: &HostNetns,
    force: bool,
) -> Vec<String> {
    let mut why = within_plan(l, earlier);
    if let Some(taken) = held_by_other_lab(l, others, me) {
        why.push(taken);
        return why;
    }
    let Some(iface) = view.interfaces.iter().find(|i| i.name == l.host) else {
        let names: Vec<&str> = view.interfaces.iter().map(|i| i.name.as_str()).collect();
        why.push(format!(
            "no such interface in the host's namespace; it has {}",
            names.join(", ")
        ));
        return why;
    };
    why.extend(cannot_take(l, iface));
    if !force {
        why.extend(carries_host_traffic(iface.index, view));
    }
    why
}

/// A VLAN id out of range, and two links of this plan on one interface, one
/// of them moving it.
fn within_plan(l: &HostLinkRecord, earlier: &[HostLinkRecord]) -> Vec<String> {
    let mut why = Vec::new();
    if let HostAttach::Vlan(id) = l.attach {
        if !(1..=4094).contains(&id) {
            why.push(format!("VLAN id {id} is out of 1..4094"));
        }
    }
    for m in earlier.iter().filter(|m| m.host == l.host) {
        if l.attach == HostAttach::Move && m.attach == HostAttach::Move {
            why.push(format!(
                "moved twice by this plan (also for {}:{})",
                m.ns, m.name
            ));
        } else if l.attach == HostAttach::Move || m.attach == HostAttach::Move {
            why.push(format!(
                "moved into a node and also used by another link of this plan ({}:{}, {}): a moved interface is its node's alone",
                m.ns, m.name, m.attach
            ));
        }
    }
    why
}

/// Another lab's: a moved interface is that lab's; moving one another lab
/// hangs devices on would pull it from under that lab. A lab built in another
/// host namespace has other interfaces.
fn held_by_other_lab(l: &HostLinkRecord, others: &[OtherLab], me: &HostNetns) -> Option<String> {
    let same_host = |o: &OtherLab| {
        o.host_netns
            .as_ref()
            .is_none_or(|h| h.dev == me.dev && h.inode == me.inode)
    };
    let o = others.iter().find(|o| {
        o.link.host == l.host
            && same_host(o)
            && (o.link.attach == HostAttach::Move || l.attach == HostAttach::Move)
    })?;
    Some(if o.link.attach == HostAttach::Move {
        format!(
            "already taken by lab {}: moved into its namespace {} as {}",
            o.lab, o.link.ns, o.link.name
        )
    } else {
        format!(
            "in use by lab {} ({} {} in {}): moving it would take it from under that lab",
            o.lab, o.link.attach, o.link.name, o.link.ns
        )
    })
}

/// What the kernel refuses: moving an immovable interface; a port's frames
/// are its bridge's or bond's, so the kernel hangs no macvlan or ipvlan on it
/// (EBUSY), and moving it would take it out of its master.
fn cannot_take(l: &HostLinkRecord, iface: &HostIf) -> Vec<String> {
    let mut why = Vec::new();
    if l.attach == HostAttach::Move && !iface.movable {
        why.push("the kernel does not let this interface change namespace".into());
    }
    if let Some(m) = &iface.master {
        match l.attach {
            HostAttach::Move => why.push(format!(
                "it is a port of {m} in the host; moving it would take it out of {m}"
            )),
            HostAttach::Macvlan | HostAttach::Ipvlan => why.push(format!(
                "it is a port of {m} in the host, and the kernel makes no {} on a port; use {m} itself",
                l.attach
            )),
            HostAttach::Vlan(_) => {}
        }
    }
    why
}

/// The host's default routes and global (management) addresses on the
/// interface `index`: taken only with --force.
fn carries_host_traffic(index: u32, view: &HostView) -> Vec<String> {
    let mut why = Vec::new();
    for (oifs, route) in &view.defaults {
        if oifs.contains(&index) {
            why.push(format!(
                "it carries the host's default route `{route}`; --force takes it anyway"
            ));
        }
    }
    let global: Vec<String> = view
        .global
        .iter()
        .filter(|(i, _)| *i == index)
        .map(|(_, a)| a.to_string())
        .collect();
    if !global.is_empty() {
        why.push(format!(
            "it carries the host's global (management) address{} {}; --force takes it anyway",
            if global.len() > 1 { "es" } else { "" },
            global.join(", ")
        ));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Refused;

    fn link(host: &str, attach: HostAttach, ns: &str) -> HostLinkRecord {
        HostLinkRecord {
            ns: ns.into(),
            name: "eth0".into(),
            host: host.into(),
            attach,
            mtu: 1500,
            moved: None,
        }
    }

    fn me() -> HostNetns {
        HostNetns {
            dev: 4,
            inode: 99,
            name: None,
            init: true,
        }
    }

    fn view() -> HostView {
        HostView {
            interfaces: [
                ("lo", None),
                ("enp1s0", None),
                ("enp2s0", None),
                ("enp3s0", None),
                ("enp4s0", Some("br0")),
            ]
            .into_iter()
            .enumerate()
            .map(|(k, (n, master))| HostIf {
                index: k as u32 + 1,
                name: n.into(),
                movable: n != "lo",
                master: master.map(String::from),
            })
            .collect(),
            global: vec![(2, "192.0.2.10/24".parse().unwrap())],
            defaults: vec![(
                vec![3],
                "default via 198.18.3.1 dev enp2s0 (IPv4, table main)".into(),
            )],
        }
    }

    #[test]
    fn a_driver_the_kernel_lacks_is_refused_naming_the_feature() {
        let links = [
            link("enp1s0", HostAttach::Vlan(11), "l-a"),
            link("enp1s0", HostAttach::Macvlan, "l-b"),
            link("enp2s0", HostAttach::Move, "l-c"),
        ];
        let no_vlan = |f: Feature| f == Feature::Vlan;
        assert_eq!(
            lacking_drivers(&links, &no_vlan),
            [
                "enp1s0 (for l-a:eth0, vlan 11): the kernel lacks `vlan` (802.1Q VLAN devices, CONFIG_VLAN_8021Q); give each LAN a host interface of its own (a macvlan or `move = true`); `tunbench doctor` lists what this kernel offers"
            ]
        );
        assert!(lacking_drivers(&links, &|_| false).is_empty());
    }

    #[test]
    fn every_problem_is_named_with_its_interface_and_node() {
        let links = [
            link("enp1s0", HostAttach::Macvlan, "l-a"),
            link("enp2s0", HostAttach::Move, "l-b"),
            link("eth9", HostAttach::Ipvlan, "l-c"),
            link("enp3s0", HostAttach::Vlan(4095), "l-d"),
            link("enp3s0", HostAttach::Move, "l-e"),
        ];
        let p = check(&links, &view(), &[], &me(), false);
        assert_eq!(p.len(), 5, "{p:#?}");
        assert!(p[0].starts_with("enp1s0 (for l-a:eth0, macvlan): it carries the host's global (management) address 192.0.2.10/24"), "{}", p[0]);
        assert!(
            p[1].contains("default route `default via 198.18.3.1 dev enp2s0 (IPv4, table main)`"),
            "{}",
            p[1]
        );
        assert!(
            p[2].contains("no such interface")
                && p[2].contains("lo, enp1s0, enp2s0, enp3s0, enp4s0"),
            "{}",
            p[2]
        );
        assert!(p[3].contains("VLAN id 4095 is out of 1..4094"), "{}", p[3]);
        assert!(
            p[4].contains("also used by another link of this plan (l-d:eth0, vlan 4095)"),
            "{}",
            p[4]
        );
        // --force takes the default route and the addresses, nothing else.
        let p = check(&links, &view(), &[], &me(), true);
        assert_eq!(p.len(), 3, "{p:#?}");
        let e = Refused { problems: p }.to_string();
        assert_eq!(e.lines().count(), 4, "{e}");
    }

    #[test]
    fn an_interface_another_lab_moved_is_never_taken() {
        let other = |attach, host_netns| OtherLab {
            lab: "hlother".into(),
            host_netns,
            link: link("enp3s0", attach, "hlother-n"),
        };
        let mine = [link("enp3s0", HostAttach::Macvlan, "l-a")];
        let p = check(
            &mine,
            &view(),
            &[other(HostAttach::Move, Some(me()))],
            &me(),
            true,
        );
        assert_eq!(p.len(), 1);
        assert!(
            p[0].contains(
                "already taken by lab hlother: moved into its namespace hlother-n as eth0"
            ),
            "{}",
            p[0]
        );
        // Another lab's macvlan on it: a move would pull it away; a macvlan is fine.
        let theirs = [other(HostAttach::Macvlan, Some(me()))];
        assert!(check(&mine, &view(), &theirs, &me(), true).is_empty());
        let p = check(
            &[link("enp3s0", HostAttach::Move, "l-a")],
            &view(),
            &theirs,
            &me(),
            true,
        );
        assert!(p[0].contains("in use by lab hlother"), "{}", p[0]);
        // A lab built in another host namespace has another enp3s0.
        let elsewhere = HostNetns { inode: 7, ..me() };
        let p = check(
            &mine,
            &view(),
            &[other(HostAttach::Move, Some(elsewhere))],
            &me(),
            true,
        );
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn a_bridge_port_is_neither_moved_nor_given_a_macvlan() {
        let links = [
            link("enp4s0", HostAttach::Move, "l-a"),
            link("enp4s0", HostAttach::Vlan(11), "l-b"),
            link("lo", HostAttach::Move, "l-c"),
        ];
        let p = check(&links[..1], &view(), &[], &me(), true);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("a port of br0 in the host; moving it would take it out of br0"),
            "{}",
            p[0]
        );
        let mv = [link("enp4s0", HostAttach::Macvlan, "l-a")];
        let p = check(&mv, &view(), &[], &me(), true);
        assert!(
            p[0].contains("the kernel makes no macvlan on a port; use br0 itself"),
            "{}",
            p[0]
        );
        assert!(check(&links[1..2], &view(), &[], &me(), false).is_empty());
        let p = check(&links[2..], &view(), &[], &me(), true);
        assert!(
            p[0].contains("does not let this interface change namespace"),
            "{}",
            p[0]
        );
    }

    #[test]
    fn two_moves_of_one_interface_are_refused() {
        let links = [
            link("enp3s0", HostAttach::Move, "l-a"),
            link("enp3s0", HostAttach::Move, "l-b"),
        ];
        let p = check(&links, &view(), &[], &me(), false);
        assert_eq!(p.len(), 1);
        assert!(
            p[0].contains("moved twice by this plan (also for l-a:eth0)"),
            "{}",
            p[0]
        );
    }
}
