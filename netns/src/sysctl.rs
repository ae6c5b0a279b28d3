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
