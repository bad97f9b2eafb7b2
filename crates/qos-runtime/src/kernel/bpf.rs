//! The classifier that tells a job's packets by the job's cgroup (`docs/jobs.md`,
//! "Enforcement"): a small eBPF program for `cls_bpf` (direct action) that reads the
//! cgroup v2 id of the packet's socket (`bpf_skb_cgroup_id`) and its IPv4 destination,
//! looks the pair up in a hash map, and on a hit sends the packet to the class the map
//! names (its minor number: the kernel keeps 16 bits of `tc_classid`, the major is the
//! filter's, `tc::bpf_filter`); on a miss it passes the packet on to the next filter (the flows' u32 filters).
//! A job's flows that name no ports (patterns; what a scheduler gives) are enforced
//! this way: the job's processes are in its cgroup (`agent::cgroup`), every socket they
//! open carries it, and the map holds (job cgroup, destination node) → the job's class.
//!
//! This kernel has no `cls_cgroup`; `net_prio`/`net_cls` would switch off cgroup v2
//! socket matching machine-wide and resolve devices in the initial network namespace
//! only. The program is assembled here (a few instructions, no compiler needed) and
//! loaded with the `bpf` system call; the filter is attached by netlink with its fd
//! (`tc::bpf_filter`), so nothing is pinned in a BPF filesystem.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::RouteNetlinkMessage;

use super::netlink::{NlError, Rtnl};
use super::tc;

/// Entries the map holds at most: (job, destination) pairs on one node.
pub const MAX_ENTRIES: u32 = 4096;

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_MAP_DELETE_ELEM: i32 = 3;
const BPF_PROG_LOAD: i32 = 5;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;

// Helper function numbers (`enum bpf_func_id`).
const FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const FUNC_SKB_LOAD_BYTES: i32 = 26;
const FUNC_SKB_CGROUP_ID: i32 = 79;

// Offsets in `struct __sk_buff`.
const SKB_PROTOCOL: i16 = 16;
const SKB_TC_CLASSID: i16 = 72;
/// Offset of the IPv4 destination address in an Ethernet frame.
const ETH_IPV4_DST: i32 = 14 + 16;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}
const fn mov_reg(dst: u8, src: u8) -> Insn {
    insn(0xbf, dst, src, 0, 0)
}
const fn mov_imm(dst: u8, imm: i32) -> Insn {
    insn(0xb7, dst, 0, 0, imm)
}
const fn add_imm(dst: u8, imm: i32) -> Insn {
    insn(0x07, dst, 0, 0, imm)
}
const fn load_w(dst: u8, src: u8, off: i16) -> Insn {
    insn(0x61, dst, src, off, 0)
}
const fn store_w(dst: u8, off: i16, src: u8) -> Insn {
    insn(0x63, dst, src, off, 0)
}
const fn store_dw(dst: u8, off: i16, src: u8) -> Insn {
    insn(0x7b, dst, src, off, 0)
}
const fn store_w_imm(dst: u8, off: i16, imm: i32) -> Insn {
    insn(0x62, dst, 0, off, imm)
}
const fn jne_imm(dst: u8, imm: i32, off: i16) -> Insn {
    insn(0x55, dst, 0, off, imm)
}
const fn jeq_imm(dst: u8, imm: i32, off: i16) -> Insn {
    insn(0x15, dst, 0, off, imm)
}
const fn call(func: i32) -> Insn {
    insn(0x85, 0, 0, 0, func)
}
const fn exit() -> Insn {
    insn(0x95, 0, 0, 0, 0)
}

/// The program, with the map's fd in its one 64-bit load. Key on the stack at fp-16:
/// cgroup id (8 bytes), IPv4 destination (4, network order), 4 zero bytes.
pub fn program(map_fd: RawFd) -> Vec<Insn> {
    const UNSPEC: usize = 24; // index of the "pass it on" exit
    let to = |from: usize| (UNSPEC - from - 1) as i16;
    let p = vec![
        mov_reg(6, 1),                 // 0: r6 = skb
        load_w(7, 6, SKB_PROTOCOL),    // 1: r7 = skb->protocol
        jne_imm(7, 0x0008, to(2)),     // 2: not IPv4 (htons 0x0800) -> pass
        mov_reg(1, 6),                 // 3
        call(FUNC_SKB_CGROUP_ID),      // 4: r0 = cgroup id of the socket
        store_dw(10, -16, 0),          // 5: key.cgroup = r0
        store_w_imm(10, -4, 0),        // 6: key.pad = 0
        mov_reg(1, 6),                 // 7
        mov_imm(2, ETH_IPV4_DST),      // 8
        mov_reg(3, 10),                // 9
        add_imm(3, -8),                // 10: r3 = &key.dst
        mov_imm(4, 4),                 // 11
        call(FUNC_SKB_LOAD_BYTES),     // 12: key.dst = daddr
        jne_imm(0, 0, to(13)),         // 13: short packet -> pass
        insn(0x18, 1, 1, 0, map_fd),   // 14: r1 = map (pseudo map fd)
        insn(0, 0, 0, 0, 0),           // 15
        mov_reg(2, 10),                // 16
        add_imm(2, -16),               // 17: r2 = &key
        call(FUNC_MAP_LOOKUP_ELEM),    // 18
        jeq_imm(0, 0, to(19)),         // 19: not a job's -> pass
        load_w(1, 0, 0),               // 20: r1 = classid
        store_w(6, SKB_TC_CLASSID, 1), // 21: skb->tc_classid = r1
        mov_imm(0, 0),                 // 22: TC_ACT_OK: classified
        exit(),                        // 23
        mov_imm(0, -1),                // 24: TC_ACT_UNSPEC: next filter
        exit(),                        // 25
    ];
    debug_assert_eq!(p.len(), UNSPEC + 2);
    p
}

fn sys_bpf(cmd: i32, attr: &mut [u64; 16]) -> io::Result<i64> {
    // SAFETY: `attr` is a zeroed 128-byte `union bpf_attr` with the fields of `cmd`
    // set; the pointers in it are to memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr() as *mut libc::c_void,
            std::mem::size_of_val(attr) as u32,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn u32s(a: u32, b: u32) -> u64 {
    u64::from(a) | (u64::from(b) << 32)
}

/// The map key of (cgroup, destination).
fn key(cgroup: u64, dst: Ipv4Addr) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&cgroup.to_ne_bytes());
    k[8..12].copy_from_slice(&dst.octets());
    k
}

/// The loaded program and its map.
#[derive(Debug)]
pub struct CgroupClassifier {
    map: OwnedFd,
    prog: OwnedFd,
}

impl CgroupClassifier {
    /// Creates the map and loads the program (root, or CAP_BPF and CAP_NET_ADMIN). The
    /// verifier's log is in the error if it refuses the program.
    pub fn load() -> io::Result<CgroupClassifier> {
        let mut a = [0u64; 16];
        a[0] = u32s(BPF_MAP_TYPE_HASH, 16); // map_type, key_size
        a[1] = u32s(4, MAX_ENTRIES); // value_size, max_entries
        let fd = sys_bpf(BPF_MAP_CREATE, &mut a)? as RawFd;
        // SAFETY: a new fd the kernel gave us, owned from here on.
        let map = unsafe { OwnedFd::from_raw_fd(fd) };

        let insns = program(map.as_raw_fd());
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 64 * 1024];
        let mut a = [0u64; 16];
        a[0] = u32s(BPF_PROG_TYPE_SCHED_CLS, insns.len() as u32);
        a[1] = insns.as_ptr() as u64;
        a[2] = license.as_ptr() as u64;
        a[3] = u32s(1, log.len() as u32); // log_level, log_size
        a[4] = log.as_mut_ptr() as u64;
        a[6] = u64::from_ne_bytes(*b"cq_jobs\0"); // prog_name
        let fd = match sys_bpf(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => fd as RawFd,
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let last = text.lines().rev().take(3).collect::<Vec<_>>().join(" / ");
                return Err(io::Error::new(
                    e.kind(),
                    format!("loading the job classifier: {e}; verifier: {last}"),
                ));
            }
        };
        // SAFETY: as above.
        let prog = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(CgroupClassifier { map, prog })
    }

    /// The program's fd, to attach it (`tc::bpf_filter`).
    pub fn prog_fd(&self) -> RawFd {
        self.prog.as_raw_fd()
    }

    /// Attaches the program to interface `iface` of the current network namespace, as a
    /// filter at preference `pref` of the qdisc whose major number is `major` (a lower
    /// preference than the flows' u32 filters, so it looks first).
    pub fn attach(&self, iface: &str, major: u16, pref: u16) -> Result<(), NlError> {
        let mut nl = Rtnl::open()?;
        let link = nl.link(iface)?.ok_or(NlError::Kernel(libc::ENODEV))?;
        let msg = tc::bpf_filter(
            link.index,
            tc::handle(major, 0),
            pref,
            self.prog_fd(),
            "cq_jobs",
        );
        nl.request(
            RouteNetlinkMessage::NewTrafficFilter(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Sends the packets of sockets in cgroup `cgroup` to `dst` to the class of minor
    /// number `minor` (of the qdisc the filter is attached to).
    pub fn set(&self, cgroup: u64, dst: Ipv4Addr, minor: u16) -> io::Result<()> {
        let k = key(cgroup, dst);
        let v = u32::from(minor).to_ne_bytes();
        let mut a = [0u64; 16];
        a[0] = u64::from(self.map.as_raw_fd() as u32);
        a[1] = k.as_ptr() as u64;
        a[2] = v.as_ptr() as u64;
        a[3] = 0; // BPF_ANY
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }

    /// Forgets (cgroup, dst); absent already is not an error.
    pub fn remove(&self, cgroup: u64, dst: Ipv4Addr) -> io::Result<()> {
        let k = key(cgroup, dst);
        let mut a = [0u64; 16];
        a[0] = u64::from(self.map.as_raw_fd() as u32);
        a[1] = k.as_ptr() as u64;
        match sys_bpf(BPF_MAP_DELETE_ELEM, &mut a) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r.map(|_| ()),
        }
    }
}

/// Removes the classifier filter at preference `pref` of the qdisc of major `major` on
/// `iface`, if there is one (a previous agent's).
pub fn detach(iface: &str, major: u16, pref: u16) -> Result<(), NlError> {
    let mut nl = Rtnl::open()?;
    let link = nl.link(iface)?.ok_or(NlError::Kernel(libc::ENODEV))?;
    let msg = tc::filter_ref(link.index, tc::handle(major, 0), pref, 0, "bpf");
    match nl.request(RouteNetlinkMessage::DelTrafficFilter(msg), 0) {
        Err(NlError::Kernel(libc::ENOENT)) | Err(NlError::Kernel(libc::EINVAL)) => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_of_the_program_lands_on_an_instruction_and_the_program_ends_in_exit() {
        let p = program(3);
        for (i, x) in p.iter().enumerate() {
            if matches!(x.code, 0x55 | 0x15) {
                let target = i as i64 + 1 + i64::from(x.off);
                assert!((0..p.len() as i64).contains(&target), "jump at {i}");
                assert_eq!(
                    p[target as usize],
                    mov_imm(0, -1),
                    "jump at {i} to {target}"
                );
            }
        }
        assert_eq!(p.last(), Some(&exit()));
        assert_eq!(p[14].imm, 3, "the map's fd in the 64-bit load");
        assert_eq!(p[14].regs >> 4, 1, "as a pseudo map fd");
    }

    #[test]
    fn the_key_is_the_cgroup_id_then_the_address_in_network_order() {
        let k = key(0x0102_0304_0506_0708, Ipv4Addr::new(10, 77, 0, 3));
        assert_eq!(&k[..8], &0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(&k[8..], &[10, 77, 0, 3, 0, 0, 0, 0]);
    }
}
