//! Traffic-control messages of the kernel backend: an `htb` qdisc and its
//! classes, `u32` filters that classify IPv4 packets by 5-tuple, and the `bfifo` put
//! back under a `tbf` link shaper on exit — built as `netlink-packet-route` messages,
//! and the kernel's dumps of them decoded back.
//!
//! `netlink-packet-route` types u32 filters; htb, tbf and fifo options are not typed
//! there, so their structures (`tc_htb_glob`, `tc_htb_opt`, `tc_tbf_qopt`,
//! `tc_fifo_qopt` of `linux/pkt_sched.h`) are laid out here, in native byte order as the
//! kernel reads them.

use netlink_packet_core::{DefaultNla, Nla};
use netlink_packet_route::tc::{
    TcAttribute, TcBpfFlags, TcFilterBpfOption, TcFilterU32Option, TcHandle, TcHeader, TcMessage,
    TcOption, TcStats2, TcU32Selector,
};
use netlink_packet_route::AddressFamily;

/// EtherType of IPv4, the protocol every filter is attached for.
pub const ETH_P_IP: u16 = 0x0800;

const TCA_OPTIONS: u16 = 2;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
/// `TC_LINKLAYER_ETHERNET`: the kernel computes transmission times itself (no rate
/// table is sent).
const LINKLAYER_ETHERNET: u8 = 1;
/// The kernel's psched tick for htb's `buffer` fields: 64 ns (`PSCHED_SHIFT` 6).
const PSCHED_TICK_NS: u128 = 64;

/// A tc handle from its major and minor numbers.
pub fn handle(major: u16, minor: u16) -> TcHandle {
    TcHandle { major, minor }
}

fn header(ifindex: u32, handle: TcHandle, parent: TcHandle, info: u32) -> TcHeader {
    TcHeader {
        family: AddressFamily::Unspec,
        index: ifindex as i32,
        handle,
        parent,
        info,
    }
}

fn raw(kind: u16, value: Vec<u8>) -> TcOption {
    TcOption::Other(DefaultNla::new(kind, value))
}

/// The htb qdisc `handle` at `parent`; unclassified packets go to class
/// `handle.major:default_minor`.
pub fn htb_qdisc(
    ifindex: u32,
    handle: TcHandle,
    parent: TcHandle,
    default_minor: u16,
) -> TcMessage {
    let mut glob = Vec::with_capacity(20);
    for v in [3u32, 10, u32::from(default_minor), 0, 0] {
        // version 3, rate2quantum 10 (unused: every class sets its quantum), defcls,
        // debug, direct_pkts
        glob.extend_from_slice(&v.to_ne_bytes());
    }
    TcMessage::from_parts(
        header(ifindex, handle, parent, 0),
        vec![
            TcAttribute::Kind("htb".into()),
            TcAttribute::Options(vec![raw(TCA_HTB_INIT, glob)]),
        ],
    )
}

/// A `bfifo` of `limit` bytes at `parent` (what a `tbf` holds by default).
pub fn bfifo_qdisc(ifindex: u32, parent: TcHandle, limit: u32) -> TcMessage {
    TcMessage::from_parts(
        header(ifindex, TcHandle::UNSPEC, parent, 0),
        vec![
            TcAttribute::Kind("bfifo".into()),
            TcAttribute::Other(DefaultNla::new(TCA_OPTIONS, limit.to_ne_bytes().to_vec())),
        ],
    )
}

/// A qdisc to delete.
pub fn qdisc_ref(ifindex: u32, handle: TcHandle, parent: TcHandle) -> TcMessage {
    TcMessage::from_parts(header(ifindex, handle, parent, 0), vec![])
}

/// An htb class's rates, in bytes per second of frames (as the qdisc counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtbRates {
    /// Guaranteed rate.
    pub rate: u64,
    /// Rate it may reach by borrowing from its parent.
    pub ceil: u64,
    /// Bytes it may send at once at `rate` and at `ceil`.
    pub burst: u32,
    /// Bytes served per round when classes borrow.
    pub quantum: u32,
}

fn ratespec(rate: u64) -> [u8; 12] {
    let mut r = [0u8; 12];
    // cell_log 0, linklayer, overhead 0, cell_align 0, mpu 0, rate (32 bits, saturated:
    // the 64-bit attribute carries larger rates).
    r[1] = LINKLAYER_ETHERNET;
    r[8..12].copy_from_slice(&(rate.min(u32::MAX as u64) as u32).to_ne_bytes());
    r
}

/// Time to send `bytes` at `rate`, in psched ticks (htb's `buffer` fields).
fn ticks(bytes: u32, rate: u64) -> u32 {
    let ns = u128::from(bytes) * 1_000_000_000 / u128::from(rate.max(1));
    (ns / PSCHED_TICK_NS).min(u32::MAX as u128) as u32
}

/// An htb class `classid` under `parent` (created, or changed if it exists and `create`
/// is false).
pub fn htb_class(ifindex: u32, classid: TcHandle, parent: TcHandle, r: HtbRates) -> TcMessage {
    let mut opt = Vec::with_capacity(44);
    opt.extend_from_slice(&ratespec(r.rate));
    opt.extend_from_slice(&ratespec(r.ceil));
    for v in [
        ticks(r.burst, r.rate),
        ticks(r.burst, r.ceil),
        r.quantum,
        0,
        0,
    ] {
        // buffer, cbuffer, quantum, level, prio
        opt.extend_from_slice(&v.to_ne_bytes());
    }
    let mut opts = vec![raw(TCA_HTB_PARMS, opt)];
    if r.rate > u64::from(u32::MAX) {
        opts.push(raw(TCA_HTB_RATE64, r.rate.to_ne_bytes().to_vec()));
    }
    if r.ceil > u64::from(u32::MAX) {
        opts.push(raw(TCA_HTB_CEIL64, r.ceil.to_ne_bytes().to_vec()));
    }
    TcMessage::from_parts(
        header(ifindex, classid, parent, 0),
        vec![TcAttribute::Kind("htb".into()), TcAttribute::Options(opts)],
    )
}

/// A class to delete.
pub fn class_ref(ifindex: u32, classid: TcHandle) -> TcMessage {
    TcMessage::from_parts(header(ifindex, classid, TcHandle::UNSPEC, 0), vec![])
}

/// `info` of a filter: preference and protocol (network byte order).
fn filter_info(pref: u16, protocol: u16) -> u32 {
    (u32::from(pref) << 16) | u32::from(protocol.to_be())
}

/// A u32 filter node `handle` (htid 800, so `0x800 << 20 | node`) at preference `pref`
/// of the qdisc `parent`, sending what `sel` matches to `classid`.
pub fn u32_filter(
    ifindex: u32,
    parent: TcHandle,
    pref: u16,
    handle: u32,
    sel: TcU32Selector,
    classid: TcHandle,
) -> TcMessage {
    TcMessage::from_parts(
        header(ifindex, handle.into(), parent, filter_info(pref, ETH_P_IP)),
        vec![
            TcAttribute::Kind("u32".into()),
            TcAttribute::Options(vec![
                TcOption::U32(TcFilterU32Option::Selector(sel)),
                TcOption::U32(TcFilterU32Option::ClassId(classid)),
            ]),
        ],
    )
}

/// A `cls_bpf` filter in direct-action mode at preference `pref` of the qdisc `parent`,
/// running the loaded program `prog_fd` (`kernel::bpf`): the program names the minor
/// number of the class of the packets it classifies (the kernel keeps 16 bits of it)
/// and passes the others on; the major is the qdisc's, given here.
pub fn bpf_filter(
    ifindex: u32,
    parent: TcHandle,
    pref: u16,
    prog_fd: i32,
    name: &str,
) -> TcMessage {
    TcMessage::from_parts(
        header(ifindex, 1.into(), parent, filter_info(pref, ETH_P_IP)),
        vec![
            TcAttribute::Kind("bpf".into()),
            TcAttribute::Options(vec![
                TcOption::Bpf(TcFilterBpfOption::ClassId(handle(parent.major, 0))),
                TcOption::Bpf(TcFilterBpfOption::ProgFd(prog_fd as u32)),
                TcOption::Bpf(TcFilterBpfOption::ProgName(name.into())),
                TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
            ]),
        ],
    )
}

/// A filter to delete (`handle` 0: every filter at that preference).
pub fn filter_ref(ifindex: u32, parent: TcHandle, pref: u16, handle: u32, kind: &str) -> TcMessage {
    TcMessage::from_parts(
        header(ifindex, handle.into(), parent, filter_info(pref, ETH_P_IP)),
        vec![TcAttribute::Kind(kind.into())],
    )
}

/// A dump request for the qdiscs, classes or filters (under `parent`) of an interface.
pub fn dump_ref(ifindex: u32, parent: TcHandle) -> TcMessage {
    TcMessage::from_parts(header(ifindex, TcHandle::UNSPEC, parent, 0), vec![])
}

/// A qdisc as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdiscInfo {
    pub handle: TcHandle,
    pub parent: TcHandle,
    pub kind: String,
    /// A tbf's rate (bytes/s) and queue limit (bytes).
    pub tbf: Option<(u64, u32)>,
}

/// A class as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    pub classid: TcHandle,
    pub parent: TcHandle,
    pub kind: String,
    /// htb rate and ceil, bytes/s.
    pub rate: Option<u64>,
    pub ceil: Option<u64>,
    /// Bytes and packets sent by the class.
    pub bytes: u64,
    pub packets: u64,
}

/// A filter as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterInfo {
    pub pref: u16,
    pub protocol: u16,
    pub handle: u32,
    pub kind: String,
    /// A u32 node's selector and target class (hash-table entries have neither).
    pub selector: Option<TcU32Selector>,
    pub classid: Option<TcHandle>,
}

fn nla_value(n: &DefaultNla) -> Vec<u8> {
    let mut v = vec![0u8; n.value_len()];
    n.emit_value(&mut v);
    v
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_of(b: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

fn kind_of(attrs: &[TcAttribute]) -> String {
    attrs
        .iter()
        .find_map(|a| match a {
            TcAttribute::Kind(k) => Some(k.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The nested attributes of a dumped `TCA_OPTIONS` of a kind `netlink-packet-route`
/// does not type (htb, tbf): it hands them over as one undecoded attribute.
fn raw_options(attrs: &[TcAttribute]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    for a in attrs {
        if let TcAttribute::Options(opts) = a {
            for o in opts {
                if let TcOption::Other(n) = o {
                    if n.kind() != TCA_OPTIONS {
                        continue;
                    }
                    let blob = nla_value(n);
                    for nla in netlink_packet_core::NlasIterator::new(&blob[..]).flatten() {
                        out.push((nla.kind(), nla.value().to_vec()));
                    }
                }
            }
        }
    }
    out
}

/// Decodes a dumped qdisc.
pub fn parse_qdisc(m: &TcMessage) -> QdiscInfo {
    let kind = kind_of(&m.attributes);
    let tbf = (kind == "tbf").then(|| {
        let opts = raw_options(&m.attributes);
        let parms = opts.iter().find(|(k, _)| *k == TCA_TBF_PARMS);
        let rate64 = opts
            .iter()
            .find(|(k, _)| *k == TCA_TBF_RATE64)
            .and_then(|(_, v)| u64_of(v));
        let rate32 = parms.and_then(|(_, v)| u32_at(v, 8)).map(u64::from);
        let limit = parms.and_then(|(_, v)| u32_at(v, 24));
        (rate64.or(rate32).unwrap_or(0), limit.unwrap_or(0))
    });
    QdiscInfo {
        handle: m.header.handle,
        parent: m.header.parent,
        kind,
        tbf,
    }
}

/// Decodes a dumped class.
pub fn parse_class(m: &TcMessage) -> ClassInfo {
    let kind = kind_of(&m.attributes);
    let mut c = ClassInfo {
        classid: m.header.handle,
        parent: m.header.parent,
        kind,
        rate: None,
        ceil: None,
        bytes: 0,
        packets: 0,
    };
    let opts = raw_options(&m.attributes);
    if let Some((_, v)) = opts.iter().find(|(k, _)| *k == TCA_HTB_PARMS) {
        c.rate = u32_at(v, 8).map(u64::from);
        c.ceil = u32_at(v, 20).map(u64::from);
    }
    for (k, v) in &opts {
        match *k {
            TCA_HTB_RATE64 => c.rate = u64_of(v).or(c.rate),
            TCA_HTB_CEIL64 => c.ceil = u64_of(v).or(c.ceil),
            _ => {}
        }
    }
    for a in &m.attributes {
        match a {
            TcAttribute::Stats2(s) => {
                for x in s {
                    if let TcStats2::Basic(b) = x {
                        c.bytes = b.bytes;
                        c.packets = u64::from(b.packets);
                    }
                }
            }
            TcAttribute::Stats(s) if c.bytes == 0 => {
                c.bytes = s.bytes;
                c.packets = u64::from(s.packets);
            }
            _ => {}
        }
    }
    c
}

/// Decodes a dumped filter.
pub fn parse_filter(m: &TcMessage) -> FilterInfo {
    let mut f = FilterInfo {
        pref: (m.header.info >> 16) as u16,
        protocol: u16::from_be((m.header.info & 0xffff) as u16),
        handle: m.header.handle.into(),
        kind: kind_of(&m.attributes),
        selector: None,
        classid: None,
    };
    for a in &m.attributes {
        if let TcAttribute::Options(opts) = a {
            for o in opts {
                match o {
                    TcOption::U32(TcFilterU32Option::Selector(s)) => f.selector = Some(s.clone()),
                    TcOption::U32(TcFilterU32Option::ClassId(c)) => f.classid = Some(*c),
                    _ => {}
                }
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;

    #[test]
    fn an_htb_class_round_trips_through_its_wire_form() {
        let r = HtbRates {
            rate: 1_250_000,
            ceil: 6_000_000_000,
            burst: 15_000,
            quantum: 1514,
        };
        let m = htb_class(7, handle(0xc05, 0x10), handle(0xc05, 1), r);
        let mut buf = vec![0u8; m.buffer_len()];
        m.emit(&mut buf);
        let back = <TcMessage as netlink_packet_core::Parseable<[u8]>>::parse(&buf[..]).unwrap();
        let c = parse_class(&back);
        assert_eq!(c.kind, "htb");
        assert_eq!(c.classid, handle(0xc05, 0x10));
        assert_eq!(c.rate, Some(1_250_000));
        assert_eq!(c.ceil, Some(6_000_000_000), "the 64-bit ceil wins");
        // 15000 bytes at 1.25 MB/s = 12 ms = 187500 ticks of 64 ns.
        assert_eq!(ticks(15_000, 1_250_000), 187_500);
    }

    #[test]
    fn filter_info_carries_preference_and_protocol_in_network_order() {
        let i = filter_info(10, ETH_P_IP);
        assert_eq!(i >> 16, 10);
        assert_eq!(u16::from_be((i & 0xffff) as u16), ETH_P_IP);
    }
}
