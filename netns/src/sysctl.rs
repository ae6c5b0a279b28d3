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

pub fn write(key: &str, value: &str) -> io::Result<()> {
    std::fs::write(proc_path(key), value).map_err(|e| {
        let what = match e.kind() {
            io::ErrorKind::NotFound => "no such sysctl in this kernel or namespace".to_string(),
            io::ErrorKind::InvalidInput => format!("the kernel rejects the value \"{value}\""),
            _ => e.to_string(),
        };
        io::Error::new(e.kind(), what)
    })
}

pub fn read(key: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(proc_path(key))?.trim().to_string())
}

#[cfg(test)]
mod tests {
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
