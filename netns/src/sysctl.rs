//! net.* sysctls, written through /proc/sys from a thread inside the namespace
//! (/proc/sys/net shows the namespace of the thread that opens it).

use std::io;
use std::path::PathBuf;

/// `net.ipv4.conf.eth0.rp_filter` -> /proc/sys/net/ipv4/conf/eth0/rp_filter.
/// A '/' in a key stands for a '.' in a name (VLAN devices), as sysctl(8) has it.
pub fn proc_path(key: &str) -> PathBuf {
    let p: String = key
        .chars()
        .map(|c| match c {
            '.' => '/',
            '/' => '.',
            c => c,
        })
        .collect();
    PathBuf::from("/proc/sys").join(p)
}

/// Write `value` to `key`. A key that appears only once its module is loaded
/// (net.netfilter.* with nf_conntrack, as on Debian 12's 6.1, where nothing
/// loads conntrack before a lab's first nftables NAT) has the module loaded
/// first, with modprobe, as the kernel itself would for a rule that needs it.
pub fn write(key: &str, value: &str) -> io::Result<()> {
    let path = proc_path(key);
    let mut result = std::fs::write(&path, value);
    let mut loaded = None;
    if let (Err(e), Some(module)) = (&result, module_behind(key)) {
        if e.kind() == io::ErrorKind::NotFound {
            loaded = Some((module, crate::module::load(module)));
            result = std::fs::write(&path, value);
        }
    }
    result.map_err(|e| {
        let what = match (e.kind(), loaded) {
            (io::ErrorKind::NotFound, Some((module, Err(why)))) => {
                format!("no such sysctl until the kernel module {module} is loaded, and loading it failed: {why}")
            }
            (io::ErrorKind::NotFound, Some((module, Ok(())))) => {
                format!("no such sysctl in this kernel or namespace, even with {module} loaded")
            }
            (io::ErrorKind::NotFound, None) => "no such sysctl in this kernel or namespace".to_string(),
            (io::ErrorKind::InvalidInput, _) => format!("the kernel rejects the value \"{value}\""),
            _ => e.to_string(),
        };
        io::Error::new(e.kind(), what)
    })
}

/// Sysctls that a namespace writes but the kernel holds as one switch for the
/// whole machine, with why they cannot be undone: `down` says they stay.
pub const MACHINE_WIDE: &[(&str, &str)] = &[(
    "net.netfilter.nf_hooks_lwtunnel",
    "the kernel cannot turn it off again: until reboot, packets that any lightweight tunnel decapsulates pass netfilter's hooks in every namespace",
)];

/// Why `key` stays set after its lab is gone, if it is machine-wide.
pub fn machine_wide(key: &str) -> Option<&'static str> {
    MACHINE_WIDE
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, why)| *why)
}

/// The module whose loading makes `key` appear, for keys that depend on one.
pub fn module_behind(key: &str) -> Option<&'static str> {
    key.starts_with("net.netfilter.").then_some("nf_conntrack")
}

pub fn read(key: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(proc_path(key))?.trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn netfilter_keys_wait_for_conntrack() {
        assert_eq!(
            super::module_behind("net.netfilter.nf_hooks_lwtunnel"),
            Some("nf_conntrack")
        );
        assert_eq!(super::module_behind("net.ipv4.ip_forward"), None);
    }

    #[test]
    fn keys_map_to_proc_paths() {
        assert_eq!(
            super::proc_path("net.ipv4.ip_forward").to_str(),
            Some("/proc/sys/net/ipv4/ip_forward")
        );
        // A VLAN device eth0.100 is written eth0/100 in a key.
        assert_eq!(
            super::proc_path("net.ipv6.conf.eth0/100.accept_ra").to_str(),
            Some("/proc/sys/net/ipv6/conf/eth0.100/accept_ra")
        );
    }
}
