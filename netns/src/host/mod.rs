//! Interfaces of the namespace tunbench runs in ("the host") given to a lab's
//! nodes (`Op::HostLink`): the checks made before anything is recorded or built
//! (reads only), the host state a moved interface is recorded with, and its
//! return by `down` and `clean`.
//!
//! A macvlan, ipvlan or VLAN device is made directly in the node's namespace and
//! is destroyed with it. A moved interface is not: deleting a namespace destroys
//! a veth and sends a real NIC to the init namespace without its addresses, so
//! `down` moves it back, under its own name, before the namespace goes.

use crate::apply::{errno, reason};
use crate::namespace;
use crate::ops::{HostAttach, Op, Plan};
use crate::socket::handle_in_file;
use crate::state::LabState;
use crate::sysctl;
use futures::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::AddressFamily;
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressMessage, AddressProtocol, AddressScope,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RoutePreference, RouteProtocol,
    RouteScope, RouteType,
};
use rtnetlink::{Handle, LinkUnspec};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The namespace tunbench ran in at `up`, so that `down` (perhaps run elsewhere,
/// perhaps after the namespace lost its name) finds the same one again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostNetns {
    /// Device and inode of its nsfs file (/proc/thread-self/ns/net at `up`).
    pub dev: u64,
    pub inode: u64,
    /// Its name under /run/netns, if it had one.
    pub name: Option<String>,
    /// Whether it was the init namespace (/proc/1/ns/net).
    pub init: bool,
}

const THIS_THREAD: &str = "/proc/thread-self/ns/net";
const INIT: &str = "/proc/1/ns/net";

impl HostNetns {
    /// The calling thread's namespace, and a descriptor of it.
    pub fn current() -> io::Result<(HostNetns, File)> {
        let f = File::open(THIS_THREAD)?;
        let m = f.metadata()?;
        let same =
            |p: &Path| std::fs::metadata(p).is_ok_and(|o| o.dev() == m.dev() && o.ino() == m.ino());
        let name = namespace::list()
            .into_iter()
            .find(|n| same(&namespace::path(n)));
        let init = same(Path::new(INIT));
        let id = HostNetns {
            dev: m.dev(),
            inode: m.ino(),
            name,
            init,
        };
        Ok((id, f))
    }

    fn is(&self, f: &File) -> bool {
        f.metadata()
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.inode)
    }

    /// Open it again: the calling thread's namespace if it is that one, else the
    /// /run/netns namespace that is (its recorded name first), else /proc/1's.
    pub fn find(&self) -> Option<File> {
        let mut places: Vec<PathBuf> = vec![THIS_THREAD.into()];
        places.extend(self.name.iter().map(|n| namespace::path(n)));
        places.extend(namespace::list().iter().map(|n| namespace::path(n)));
        places.push(INIT.into());
        places
            .into_iter()
            .find_map(|p| File::open(p).ok().filter(|f| self.is(f)))
    }

    /// "the init namespace", "namespace hlh-12", "namespace nsfs inode 4026532"
    pub fn describe(&self) -> String {
        match (&self.name, self.init) {
            (_, true) => "the init namespace".into(),
            (Some(n), _) => format!("namespace {n}"),
            (None, false) => format!("the namespace with nsfs inode {}", self.inode),
        }
    }
}

/// One `Op::HostLink` as the lab's record holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLinkRecord {
    /// The node's namespace and its device there.
    pub ns: String,
    pub name: String,
    /// The host interface it is made from.
    pub host: String,
    pub attach: HostAttach,
    pub mtu: u32,
    /// For a moved interface: the host's state of it, read before anything was made.
    #[serde(default)]
    pub moved: Option<HostInterface>,
}

impl HostLinkRecord {
    /// "enp3s0 (moved into home-pc as eth0)"
    pub fn describe(&self) -> String {
        match self.attach {
            HostAttach::Move => format!("{} (moved into {} as {})", self.host, self.ns, self.name),
            a => format!("{} ({a} {} in {})", self.host, self.name, self.ns),
        }
    }
}

/// A host interface's state, as `down` puts it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInterface {
    pub ifindex: u32,
    pub name: String,
    /// The kernel's link kind ("veth"); None for a physical NIC.
    pub kind: Option<String>,
    /// Current MAC, and the permanent one where the driver reports it
    /// ("aa:bb:cc:dd:ee:ff").
    pub mac: String,
    pub perm_mac: Option<String>,
    pub mtu: u32,
    pub up: bool,
    /// Its permanent addresses, in the kernel's order (the first IPv4 one of a
    /// subnet is the primary).
    pub addresses: Vec<SavedAddress>,
    /// Routes of the main table that go out of it, other than the kernel's own
    /// (proto kernel) and router advertisements' (proto ra).
    pub routes: Vec<SavedRoute>,
    /// net.ipv4.conf.DEV.* and net.ipv6.conf.DEV.*, every readable one.
    pub sysctls: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedAddress {
    pub addr: IpNetwork,
    pub broadcast: Option<Ipv4Addr>,
    pub label: Option<String>,
    pub scope: u8,
    /// IFA_F_* flags as the kernel reported them.
    pub flags: u32,
    pub protocol: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedRoute {
    pub to: IpNetwork,
    pub via: Option<IpAddr>,
    pub src: Option<IpAddr>,
    pub metric: Option<u32>,
    pub protocol: u8,
    pub scope: u8,
    pub kind: u8,
    pub tos: u8,
    /// RTM flags (RTNH_F_ONLINK is the one that matters).
    pub flags: u32,
    pub pref: Option<u8>,
}

impl std::fmt::Display for SavedRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if self.to.prefix() == 0 {
            write!(f, "default")?;
        } else {
            write!(f, "{}", self.to)?;
        }
        if let Some(v) = self.via {
            write!(f, " via {v}")?;
        }
        if let Some(m) = self.metric {
            write!(f, " metric {m}")?;
        }
        Ok(())
    }
}

/// Why a plan's host interfaces are refused: every problem, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host interfaces refused (nothing was recorded or made):\n{}", lines(.problems))]
pub struct Refused {
    pub problems: Vec<String>,
}

fn lines(v: &[String]) -> String {
    v.iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A plan's `Op::HostLink`s, as records (no host state yet).
pub fn host_links(plan: &Plan) -> Vec<HostLinkRecord> {
    plan.ops
        .iter()
        .filter_map(|op| match op {
            Op::HostLink {
                ns,
                name,
                host,
                attach,
                mtu,
            } => Some(HostLinkRecord {
                ns: ns.clone(),
                name: name.clone(),
                host: host.clone(),
                attach: *attach,
                mtu: *mtu,
                moved: None,
            }),
            _ => None,
        })
        .collect()
}

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

/// Refuse a plan's host links that are unsafe or impossible, before anything is
/// recorded or made. Reads only: the host's interfaces, addresses and routes and
/// the other labs' records. With `force`, an interface that carries the default
/// route or global addresses is taken anyway; one another lab has moved (or
/// that another lab uses, for a move) never is.
pub async fn preflight(plan: &Plan, force: bool) -> Result<(), Refused> {
    let links = host_links(plan);
    if links.is_empty() {
        return Ok(());
    }
    let refused = |why: String| Refused {
        problems: vec![why],
    };
    let (me, file) =
        HostNetns::current().map_err(|e| refused(format!("reading the host's namespace: {e}")))?;
    let view = read_view(&file)
        .await
        .map_err(|e| refused(format!("reading the host's interfaces: {e}")))?;
    let others = other_labs(&plan.lab);
    let problems = check(&links, &view, &others, &me, force);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Refused { problems })
    }
}

/// The host links recorded by every lab but `lab`.
pub fn other_labs(lab: &str) -> Vec<OtherLab> {
    let mut v = Vec::new();
    for other in LabState::lab_names() {
        if other == lab {
            continue;
        }
        let Ok(Some(s)) = LabState::load(&other) else {
            continue;
        };
        for link in s.host_links {
            v.push(OtherLab {
                lab: other.clone(),
                host_netns: s.host_netns.clone(),
                link,
            });
        }
    }
    v
}

/// The checks themselves, on what was read (pure).
pub fn check(
    links: &[HostLinkRecord],
    view: &HostView,
    others: &[OtherLab],
    me: &HostNetns,
    force: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    let names: Vec<&str> = view.interfaces.iter().map(|i| i.name.as_str()).collect();
    for (k, l) in links.iter().enumerate() {
        let who = format!("{} (for {}:{}, {})", l.host, l.ns, l.name, l.attach);
        let mut refuse = |why: String| problems.push(format!("{who}: {why}"));
        if let HostAttach::Vlan(id) = l.attach {
            if !(1..=4094).contains(&id) {
                refuse(format!("VLAN id {id} is out of 1..4094"));
            }
        }
        // Two links of this plan on one interface, one of them moving it.
        for m in &links[..k] {
            if m.host != l.host {
                continue;
            }
            if l.attach == HostAttach::Move && m.attach == HostAttach::Move {
                refuse(format!(
                    "moved twice by this plan (also for {}:{})",
                    m.ns, m.name
                ));
            } else if l.attach == HostAttach::Move || m.attach == HostAttach::Move {
                refuse(format!(
                    "moved into a node and also used by another link of this plan ({}:{}, {}): a moved interface is its node's alone",
                    m.ns, m.name, m.attach
                ));
            }
        }
        // Another lab's: a moved interface is that lab's; moving one another lab
        // hangs devices on would pull it from under that lab.
        let same_host = |o: &OtherLab| {
            o.host_netns
                .as_ref()
                .is_none_or(|h| h.dev == me.dev && h.inode == me.inode)
        };
        let taken = others.iter().find(|o| {
            o.link.host == l.host
                && same_host(o)
                && (o.link.attach == HostAttach::Move || l.attach == HostAttach::Move)
        });
        if let Some(o) = taken {
            refuse(if o.link.attach == HostAttach::Move {
                format!(
                    "already taken by lab {}: moved into its namespace {} as {}",
                    o.lab, o.link.ns, o.link.name
                )
            } else {
                format!(
                    "in use by lab {} ({} {} in {}): moving it would take it from under that lab",
                    o.lab, o.link.attach, o.link.name, o.link.ns
                )
            });
            continue;
        }
        let Some(HostIf {
            index,
            movable,
            master,
            ..
        }) = view.interfaces.iter().find(|i| i.name == l.host)
        else {
            refuse(format!(
                "no such interface in the host's namespace; it has {}",
                names.join(", ")
            ));
            continue;
        };
        if l.attach == HostAttach::Move && !movable {
            refuse("the kernel does not let this interface change namespace".into());
        }
        // A port's frames are its bridge's or bond's: the kernel hangs no macvlan
        // or ipvlan on it (EBUSY), and moving it would take it out of its master.
        if let Some(m) = master {
            match l.attach {
                HostAttach::Move => refuse(format!(
                    "it is a port of {m} in the host; moving it would take it out of {m}"
                )),
                HostAttach::Macvlan | HostAttach::Ipvlan => refuse(format!(
                    "it is a port of {m} in the host, and the kernel makes no {} on a port; use {m} itself",
                    l.attach
                )),
                HostAttach::Vlan(_) => {}
            }
        }
        if force {
            continue;
        }
        for (oifs, route) in &view.defaults {
            if oifs.contains(index) {
                refuse(format!(
                    "it carries the host's default route `{route}`; --force takes it anyway"
                ));
            }
        }
        let global: Vec<String> = view
            .global
            .iter()
            .filter(|(i, _)| i == index)
            .map(|(_, a)| a.to_string())
            .collect();
        if !global.is_empty() {
            refuse(format!(
                "it carries the host's global (management) address{} {}; --force takes it anyway",
                if global.len() > 1 { "es" } else { "" },
                global.join(", ")
            ));
        }
    }
    problems
}

async fn dump_links(h: &Handle) -> Result<Vec<LinkMessage>, String> {
    h.link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| format!("listing interfaces: {}", reason(e)))
}

async fn dump_addresses(h: &Handle) -> Result<Vec<AddressMessage>, String> {
    h.address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| format!("listing addresses: {}", reason(e)))
}

async fn dump_routes(h: &Handle) -> Result<Vec<RouteMessage>, String> {
    let mut all = Vec::new();
    for v6 in [false, true] {
        let mut m = RouteMessage::default();
        m.header.address_family = if v6 {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        let v: Vec<RouteMessage> = h
            .route()
            .get(m)
            .execute()
            .try_collect()
            .await
            .map_err(|e| format!("listing routes: {}", reason(e)))?;
        all.extend(v);
    }
    Ok(all)
}

fn link_name(l: &LinkMessage) -> Option<&str> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(n) => Some(n.as_str()),
        _ => None,
    })
}

fn link_kind(l: &LinkMessage) -> Option<String> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos.iter().find_map(|i| match i {
            LinkInfo::Kind(k) => Some(k.to_string()),
            _ => None,
        }),
        _ => None,
    })
}

fn mac_text(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn link_mac(l: &LinkMessage) -> String {
    l.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Address(m) => Some(mac_text(m)),
            _ => None,
        })
        .unwrap_or_default()
}

fn link_perm_mac(l: &LinkMessage) -> Option<String> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::PermAddress(m) if m.iter().any(|b| *b != 0) => Some(mac_text(m)),
        _ => None,
    })
}

fn table_of(r: &RouteMessage) -> u32 {
    r.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(r.header.table as u32)
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(x) => Some(IpAddr::V4(*x)),
        RouteAddress::Inet6(x) => Some(IpAddr::V6(*x)),
        _ => None,
    }
}

/// Output interfaces of a route (every next hop of a multipath one).
fn route_oifs(r: &RouteMessage) -> Vec<u32> {
    let mut v = Vec::new();
    for a in &r.attributes {
        match a {
            RouteAttribute::Oif(i) => v.push(*i),
            RouteAttribute::MultiPath(hops) => v.extend(hops.iter().map(|h| h.interface_index)),
            _ => {}
        }
    }
    v
}

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

fn saved_route(r: &RouteMessage) -> Option<SavedRoute> {
    let v6 = r.header.address_family == AddressFamily::Inet6;
    let mut to = None;
    let mut s = SavedRoute {
        to: IpNetwork::new(unspecified(v6), 0).ok()?,
        via: None,
        src: None,
        metric: None,
        protocol: r.header.protocol.into(),
        scope: r.header.scope.into(),
        kind: r.header.kind.into(),
        tos: r.header.tos,
        flags: r.header.flags.bits(),
        pref: None,
    };
    for a in &r.attributes {
        match a {
            RouteAttribute::Destination(d) => to = route_ip(d),
            RouteAttribute::Gateway(g) => s.via = route_ip(g),
            RouteAttribute::PrefSource(p) => s.src = route_ip(p),
            RouteAttribute::Priority(m) => s.metric = Some(*m),
            RouteAttribute::Preference(p) => s.pref = Some((*p).into()),
            _ => {}
        }
    }
    s.to = IpNetwork::new(
        to.unwrap_or(unspecified(v6)),
        r.header.destination_prefix_length,
    )
    .ok()?;
    Some(s)
}

/// An address message's own address: IFA_LOCAL where present (IFA_ADDRESS is
/// the peer on point-to-point links), with its prefix length.
pub(crate) fn address_of(a: &AddressMessage) -> Option<IpNetwork> {
    let mut ip = None;
    for at in &a.attributes {
        match at {
            AddressAttribute::Local(x) => ip = Some(*x),
            AddressAttribute::Address(x) if ip.is_none() => ip = Some(*x),
            _ => {}
        }
    }
    IpNetwork::new(ip?, a.header.prefix_len).ok()
}

fn address_flags(a: &AddressMessage) -> u32 {
    a.attributes
        .iter()
        .find_map(|at| match at {
            AddressAttribute::Flags(f) => Some(f.bits()),
            _ => None,
        })
        .unwrap_or(a.header.flags.bits() as u32)
}

const RT_TABLE_MAIN: u32 = 254;
const RT_TABLE_LOCAL: u32 = 255;

/// The host's interfaces, global addresses and default routes.
pub async fn read_view(host: &File) -> io::Result<HostView> {
    let h = handle_in_file(host)?;
    let links = dump_links(&h).await.map_err(io::Error::other)?;
    let addrs = dump_addresses(&h).await.map_err(io::Error::other)?;
    let routes = dump_routes(&h).await.map_err(io::Error::other)?;
    let names: std::collections::HashMap<u32, String> = links
        .iter()
        .filter_map(|l| Some((l.header.index, link_name(l)?.to_string())))
        .collect();
    let mut v = HostView::default();
    for l in &links {
        let Some(n) = link_name(l) else { continue };
        let immutable = l
            .attributes
            .iter()
            .any(|a| matches!(a, LinkAttribute::NetnsImmutable(true)))
            || l.header.flags.contains(LinkFlags::Loopback);
        let master = l.attributes.iter().find_map(|a| match a {
            LinkAttribute::Controller(i) => names.get(i).cloned(),
            _ => None,
        });
        v.interfaces.push(HostIf {
            index: l.header.index,
            name: n.to_string(),
            movable: !immutable,
            master,
        });
    }
    for a in &addrs {
        if a.header.scope == AddressScope::Universe {
            if let Some(ip) = address_of(a) {
                v.global.push((a.header.index, ip));
            }
        }
    }
    for r in &routes {
        let table = table_of(r);
        if r.header.destination_prefix_length != 0
            || table == RT_TABLE_LOCAL
            || r.header.kind != RouteType::Unicast
        {
            continue;
        }
        let oifs = route_oifs(r);
        let Some(s) = saved_route(r) else { continue };
        let devs: Vec<&str> = oifs
            .iter()
            .filter_map(|i| names.get(i).map(String::as_str))
            .collect();
        let family = if s.to.is_ipv6() { "IPv6" } else { "IPv4" };
        let table = match table {
            RT_TABLE_MAIN => "main".to_string(),
            t => t.to_string(),
        };
        let text = format!("{s} dev {} ({family}, table {table})", devs.join(","));
        v.defaults.push((oifs, text));
    }
    Ok(v)
}

/// Read a host interface's state before it is moved: what `down` restores.
pub async fn read_interface(host: &File, name: &str) -> io::Result<HostInterface> {
    let h = handle_in_file(host)?;
    let links = dump_links(&h).await.map_err(io::Error::other)?;
    let l = links
        .iter()
        .find(|l| link_name(l) == Some(name))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {name} in the host's namespace"),
            )
        })?;
    let index = l.header.index;
    let mut iface = HostInterface {
        ifindex: index,
        name: name.to_string(),
        kind: link_kind(l),
        mac: link_mac(l),
        perm_mac: link_perm_mac(l),
        mtu: l
            .attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::Mtu(m) => Some(*m),
                _ => None,
            })
            .unwrap_or(0),
        up: l.header.flags.contains(LinkFlags::Up),
        addresses: Vec::new(),
        routes: Vec::new(),
        sysctls: Vec::new(),
    };
    for a in dump_addresses(&h).await.map_err(io::Error::other)? {
        if a.header.index != index {
            continue;
        }
        let flags = address_flags(&a);
        let protocol = a.attributes.iter().find_map(|at| match at {
            AddressAttribute::Protocol(p) => Some(u8::from(*p)),
            _ => None,
        });
        // The kernel's own (IPv6 link-local, SLAAC) come back by themselves.
        let kernels = matches!(
            protocol.map(AddressProtocol::from),
            Some(
                AddressProtocol::Loopback
                    | AddressProtocol::RouterAnnouncement
                    | AddressProtocol::LinkLocal
            )
        );
        if flags & AddressFlags::Permanent.bits() == 0 || kernels {
            continue;
        }
        let Some(addr) = address_of(&a) else { continue };
        iface.addresses.push(SavedAddress {
            addr,
            broadcast: a.attributes.iter().find_map(|at| match at {
                AddressAttribute::Broadcast(b) => Some(*b),
                _ => None,
            }),
            label: a.attributes.iter().find_map(|at| match at {
                AddressAttribute::Label(l) if l != name => Some(l.clone()),
                _ => None,
            }),
            scope: a.header.scope.into(),
            flags,
            protocol,
        });
    }
    for r in dump_routes(&h).await.map_err(io::Error::other)? {
        let own = matches!(r.header.protocol, RouteProtocol::Kernel | RouteProtocol::Ra);
        if own
            || table_of(&r) != RT_TABLE_MAIN
            || r.attributes
                .iter()
                .any(|a| matches!(a, RouteAttribute::MultiPath(_) | RouteAttribute::NhId(_)))
            || route_oifs(&r) != [index]
        {
            continue;
        }
        iface.routes.extend(saved_route(&r));
    }
    let dev = name.to_string();
    iface.sysctls = namespace::run_in_file(host, move || Ok(read_sysctls(&dev)))?;
    Ok(iface)
}

/// Every readable net.ipv4.conf.DEV.* and net.ipv6.conf.DEV.*, in the calling
/// thread's namespace, as sysctl keys (a '.' in DEV written '/').
fn read_sysctls(dev: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for family in ["ipv4", "ipv6"] {
        let dir = PathBuf::from(format!("/proc/sys/net/{family}/conf/{dev}"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        files.sort();
        for f in files {
            let key = format!("net.{family}.conf.{}.{f}", dev.replace('.', "/"));
            if let Ok(value) = sysctl::read(&key) {
                v.push((key, value));
            }
        }
    }
    v
}

/// Where a moved interface was found, and under which index and name.
struct Found {
    place: String,
    ns: Option<File>,
    handle: Handle,
    index: u32,
}

/// The link of `links` that is `iface`: by name (with its MAC), else by its MAC
/// among devices of its kind (ipvlan and VLAN devices share their lower's MAC;
/// a macvlan has its own, but is never the interface itself).
fn find_link<'a>(
    links: &'a [LinkMessage],
    iface: &HostInterface,
    name: &str,
) -> Option<&'a LinkMessage> {
    let mac_matches = |l: &LinkMessage| match (&iface.perm_mac, link_perm_mac(l)) {
        (Some(p), Some(q)) => *p == q,
        _ => link_mac(l) == iface.mac,
    };
    let same_kind = |l: &LinkMessage| link_kind(l) == iface.kind;
    links
        .iter()
        .find(|l| link_name(l) == Some(name) && mac_matches(l) && same_kind(l))
        .or_else(|| {
            links
                .iter()
                .find(|l| mac_matches(l) && same_kind(l) && !iface.mac.is_empty())
        })
}

async fn locate(
    host: &File,
    host_handle: &Handle,
    rec: &HostLinkRecord,
    iface: &HostInterface,
    lab: &str,
) -> Result<Found, NotGiven> {
    let found = |place: String, ns: Option<File>, h: Handle, l: &LinkMessage| Found {
        place,
        ns,
        handle: h,
        index: l.header.index,
    };
    // The node's namespace first (the usual place), then the host's (an `up`
    // killed before the move, or a return that got this far), then elsewhere:
    // namespaces of no other lab, and the init namespace, where a deleted
    // namespace sends a physical NIC.
    let host_id = host.metadata().ok().map(|m| (m.dev(), m.ino()));
    let search = |path: PathBuf, place: String, name: String| async move {
        let f = File::open(&path).ok()?;
        if f.metadata().ok().map(|m| (m.dev(), m.ino())) == host_id {
            return None;
        }
        let h = handle_in_file(&f).ok()?;
        let links = dump_links(&h).await.ok()?;
        let l = find_link(&links, iface, &name)?;
        Some(found(place, Some(f), h.clone(), l))
    };
    if namespace::exists(&rec.ns) && !namespace::is_placeholder(&rec.ns) {
        let place = format!("namespace {}", rec.ns);
        if let Some(f) = search(namespace::path(&rec.ns), place, rec.name.clone()).await {
            return Ok(f);
        }
    }
    let host_links = dump_links(host_handle).await?;
    if let Some(l) = find_link(&host_links, iface, &iface.name) {
        return Ok(found("the host".into(), None, host_handle.clone(), l));
    }
    for n in namespace::list() {
        if n == rec.ns || namespace::is_placeholder(&n) {
            continue;
        }
        // Never from another lab's namespace.
        match crate::inspect::marker_of(&n).await {
            Ok(Some(m)) if m != lab => continue,
            Err(_) => continue,
            _ => {}
        }
        let place = format!("namespace {n}");
        if let Some(f) = search(namespace::path(&n), place, rec.name.clone()).await {
            return Ok(f);
        }
    }
    let place = "the init namespace".to_string();
    if let Some(f) = search(INIT.into(), place, rec.name.clone()).await {
        return Ok(f);
    }
    // Another lab that moved the same interface holds it: this lab's `up` lost
    // the race for it (its move failed), so there is nothing of ours to give.
    let holder = other_labs(lab).into_iter().find(|o| {
        o.link.host == rec.host && o.link.moved.as_ref().is_some_and(|m| m.mac == iface.mac)
    });
    if let Some(o) = holder {
        return Err(NotGiven::NotOurs(format!(
            "lab {} holds it (moved into {} as {}); this lab never had it",
            o.lab, o.link.ns, o.link.name
        )));
    }
    Err(NotGiven::Failed(format!(
        "not found: no {} in {} and no interface with MAC {} in any namespace",
        rec.name, rec.ns, iface.mac
    )))
}

/// Why a moved interface was not given back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotGiven {
    /// It could not be, now: its namespace and the record stay for a retry.
    Failed(String),
    /// Another lab holds it: there is nothing of this lab's to give back.
    NotOurs(String),
}

impl std::fmt::Display for NotGiven {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            NotGiven::Failed(why) | NotGiven::NotOurs(why) => f.write_str(why),
        }
    }
}

impl From<String> for NotGiven {
    fn from(why: String) -> Self {
        NotGiven::Failed(why)
    }
}

/// Give a moved interface back to the host namespace `host` under its original
/// name, and restore what the record holds: MTU, MAC, per-device sysctls,
/// addresses, up/down state, routes. Where it was found and what could not be
/// restored (no retry would), or why it failed (a retry may succeed).
pub async fn give_back(
    host: &File,
    rec: &HostLinkRecord,
    lab: &str,
) -> Result<(String, Vec<String>), NotGiven> {
    let Some(iface) = &rec.moved else {
        return Ok((String::new(), Vec::new()));
    };
    let hh = handle_in_file(host).map_err(|e| format!("netlink in the host's namespace: {e}"))?;
    let at = locate(host, &hh, rec, iface, lab).await?;
    let place = at.place.clone();
    if at.ns.is_some() {
        let host_links = dump_links(&hh).await?;
        let index_free = !host_links.iter().any(|l| l.header.index == iface.ifindex);
        // One request: to the host, under its name (a name taken there would
        // fail it, leaving the interface where it is), down, its index if free.
        let send = |keep_index: bool| {
            let mut m = LinkUnspec::new_with_index(at.index)
                .setns_by_fd(host.as_raw_fd())
                .name(iface.name.clone())
                .down();
            if keep_index {
                m = m.append_extra_attribute(LinkAttribute::NewIfIndex(iface.ifindex as i32));
            }
            at.handle.link().set(m.build()).execute()
        };
        match send(index_free).await {
            Ok(()) => {}
            Err(e) if index_free && errno(&e) != Some(libc::EEXIST) => send(false)
                .await
                .map_err(|e| format!("moving it back from {place}: {}", reason(e)))?,
            Err(e) => return Err(format!("moving it back from {place}: {}", reason(e)).into()),
        }
    }
    let warnings = restore(host, &hh, iface)
        .await
        .map_err(|e| format!("{e} (it is back in the host's namespace, from {place})"))?;
    Ok((place, warnings))
}

/// Restore `iface`'s recorded state in the host; what could not be restored
/// but needs no retry (sysctls the kernel refuses).
async fn restore(host: &File, h: &Handle, iface: &HostInterface) -> Result<Vec<String>, String> {
    let links = dump_links(h).await?;
    let l = links
        .iter()
        .find(|l| link_name(l) == Some(iface.name.as_str()))
        .or_else(|| find_link(&links, iface, &iface.name))
        .ok_or_else(|| format!("{} is not in the host's namespace", iface.name))?;
    let index = l.header.index;
    let mut m = LinkUnspec::new_with_index(index);
    if link_name(l) != Some(iface.name.as_str()) {
        // Renaming needs it down; it is brought up again below if it was up.
        m = m.name(iface.name.clone()).down();
    }
    if !iface.up {
        m = m.down();
    }
    if link_mac(l) != iface.mac {
        if let Some(mac) = parse_mac(&iface.mac) {
            m = m.address(mac);
        }
    }
    let mtu = l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Mtu(m) => Some(*m),
        _ => None,
    });
    if mtu != Some(iface.mtu) {
        m = m.mtu(iface.mtu);
    }
    h.link()
        .set(m.build())
        .execute()
        .await
        .map_err(|e| format!("setting its name, MAC and MTU: {}", reason(e)))?;
    // Per-device sysctls were reset from conf.default when it changed namespace;
    // before addresses and up, as some of them (addr_gen_mode, disable_ipv6) act then.
    let sysctls = iface.sysctls.clone();
    let failed = namespace::run_in_file(host, move || {
        let mut failed = Vec::new();
        for (k, v) in &sysctls {
            if sysctl::read(k).is_ok_and(|now| now == *v) {
                continue;
            }
            if let Err(e) = sysctl::write(k, v) {
                failed.push(format!("{k}={v}: {e}"));
            }
        }
        Ok(failed)
    })
    .map_err(|e| format!("restoring its sysctls: {e}"))?;
    let mut warnings = Vec::new();
    if !failed.is_empty() {
        // Reported, not retried: the interface is back, and a sysctl the kernel
        // refuses now it would refuse on every retry.
        warnings.push(format!(
            "{}: sysctls not restored: {}",
            iface.name,
            failed.join("; ")
        ));
    }
    for a in &iface.addresses {
        let mut req = h.address().add(index, a.addr.ip(), a.addr.prefix());
        let msg = req.message_mut();
        msg.header.scope = AddressScope::from(a.scope);
        // The flags one can ask for; the kernel sets the rest (permanent, tentative).
        const SETTABLE: u32 = 0x02 | 0x10 | 0x100 | 0x200 | 0x400;
        msg.attributes.retain(|at| {
            !matches!(
                at,
                AddressAttribute::Flags(_) | AddressAttribute::Broadcast(_)
            )
        });
        msg.attributes
            .push(AddressAttribute::Flags(AddressFlags::from_bits_retain(
                a.flags & SETTABLE,
            )));
        if let Some(b) = a.broadcast {
            msg.attributes.push(AddressAttribute::Broadcast(b));
        }
        if let Some(l) = &a.label {
            msg.attributes.push(AddressAttribute::Label(l.clone()));
        }
        if let Some(p) = a.protocol {
            msg.attributes
                .push(AddressAttribute::Protocol(AddressProtocol::from(p)));
        }
        match req.execute().await {
            Ok(()) => {}
            Err(e) if errno(&e) == Some(libc::EEXIST) => {}
            Err(e) => return Err(format!("adding {}: {}", a.addr, reason(e))),
        }
    }
    if iface.up {
        h.link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(|e| format!("setting it up: {}", reason(e)))?;
    }
    for r in &iface.routes {
        add_route(h, index, r).await?;
    }
    Ok(warnings)
}

fn parse_mac(s: &str) -> Option<Vec<u8>> {
    s.split(':')
        .map(|x| u8::from_str_radix(x, 16).ok())
        .collect()
}

async fn add_route(h: &Handle, index: u32, r: &SavedRoute) -> Result<(), String> {
    let mut m = RouteMessage::default();
    let v6 = r.to.is_ipv6();
    m.header.address_family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.destination_prefix_length = r.to.prefix();
    m.header.tos = r.tos;
    m.header.table = RT_TABLE_MAIN as u8;
    m.header.protocol = RouteProtocol::from(r.protocol);
    m.header.scope = RouteScope::from(r.scope);
    m.header.kind = RouteType::from(r.kind);
    // RTNH_F_ONLINK is the flag one asks for; the others are the kernel's report.
    m.header.flags = RouteFlags::from_bits_retain(r.flags & 0x4);
    let addr = |ip: IpAddr| match ip {
        IpAddr::V4(x) => RouteAddress::Inet(x),
        IpAddr::V6(x) => RouteAddress::Inet6(x),
    };
    if r.to.prefix() != 0 {
        m.attributes
            .push(RouteAttribute::Destination(addr(r.to.network())));
    }
    if let Some(g) = r.via {
        m.attributes.push(RouteAttribute::Gateway(addr(g)));
    }
    if let Some(s) = r.src {
        m.attributes.push(RouteAttribute::PrefSource(addr(s)));
    }
    if let Some(p) = r.metric {
        m.attributes.push(RouteAttribute::Priority(p));
    }
    if let Some(p) = r.pref {
        m.attributes
            .push(RouteAttribute::Preference(RoutePreference::from(p)));
    }
    m.attributes.push(RouteAttribute::Oif(index));
    // An IPv6 gateway is reachable once the interface's prefix is, which can lag
    // `up` by a moment: a few tries.
    let mut tries = 0;
    loop {
        match h.route().add(m.clone()).execute().await {
            Ok(()) => return Ok(()),
            Err(e) if errno(&e) == Some(libc::EEXIST) => return Ok(()),
            Err(_) if tries < 20 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(format!("adding route {r}: {}", reason(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_moved_interface_record_round_trips() {
        let r = HostLinkRecord {
            moved: Some(HostInterface {
                ifindex: 3,
                name: "enp1s0".into(),
                kind: None,
                mac: "02:00:00:00:00:01".into(),
                perm_mac: None,
                mtu: 1500,
                up: true,
                addresses: vec![],
                routes: vec![SavedRoute {
                    to: "0.0.0.0/0".parse().unwrap(),
                    via: Some("198.18.0.1".parse().unwrap()),
                    src: None,
                    metric: Some(100),
                    protocol: 4,
                    scope: 0,
                    kind: 1,
                    tos: 0,
                    flags: 0,
                    pref: None,
                }],
                sysctls: vec![("net.ipv4.conf.enp1s0.rp_filter".into(), "2".into())],
            }),
            ..link("enp1s0", HostAttach::Move, "l-a")
        };
        assert_eq!(r.describe(), "enp1s0 (moved into l-a as eth0)");
        assert_eq!(
            r.moved.as_ref().unwrap().routes[0].to_string(),
            "default via 198.18.0.1 metric 100"
        );
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<HostLinkRecord>(&j).unwrap(), r);
        assert_eq!(
            parse_mac("02:00:00:00:00:0a"),
            Some(vec![2, 0, 0, 0, 0, 10])
        );
    }
}
