//! The agent-to-agent packet format on UDP (thesis §4.2: what the MCP's SEND and RECV
//! machines put on the wire, here carried in one UDP datagram per packet).
//!
//! Two levels, as in smoltcp's `wire` module: [`Packet`] is a zero-copy view over a
//! buffer whose lengths are validated once by [`Packet::new_checked`] so later accessors
//! cannot panic, and [`Repr`] is the parsed high-level form with `parse` / `emit`.
//!
//! Layout (all fields big-endian, 40-byte header, version 3; every datagram ends with
//! the 32-byte authentication trailer of `transport::auth`, which this module never
//! sees: the authenticated link strips it before parsing and adds it after emitting):
//!
//! ```text
//!  0 magic "CQ" (u16)   2 version (u8)   3 kind (u8: 1 data, 2 ack, 3 probe, 4 reset)
//!  4 priority (u8)      5 flags (u8)     6 source port (u16)   8 destination port (u16)
//!    flags: bit 0 "payload encrypted", set and read by the authenticated link only;
//!    the other bits zero
//! 10 reserved (u16, zero)
//! 12 connection id: data, probe: the sending flow's current connection; ack, reset:
//!    the connection they answer (never zero)
//! 16 receiver id: data, probe: the receiver instance the sender has heard from (zero:
//!    none yet); ack: the receiver's own (never zero); reset: the one the refused
//!    packet named
//! 20 data: packet sequence     | ack: cumulative ack (next expected sequence)
//! 24 data: message sequence    | ack: window (first sequence the sender may NOT send)
//! 28 data: message length      | ack: selective-ack bitmap, sequences cum+1 ..= cum+32
//! 32 data: offset in message   | ack: selective-ack bitmap, sequences cum+33 ..= cum+64
//! 36 data: payload length      | ack: delivered (first sequence the receiving port has
//!                              |      not taken; at most the cumulative ack)
//!                              | probe/reset: zero
//! 40 payload (data only)
//! ```
//!
//! The two ids make a connection (as TCP's initial sequence numbers and QUIC's
//! connection ids do): a sender picks a fresh random connection id whenever it starts a
//! flow's sequence space at zero (a new agent, or a flow reset), and a receiver a fresh
//! random receiver id whenever it creates a flow's receive state. So a restarted agent
//! is told apart from a live one on either side (see `transport::reliable`).

use thiserror::Error;

/// Magic number opening every packet ("CQ").
pub const MAGIC: u16 = 0x4351;
/// Wire-format version this build speaks (3: version 2's header, every datagram sealed
/// with the authentication trailer).
pub const VERSION: u8 = 3;
/// Header length in bytes.
pub const HEADER_LEN: usize = 40;
/// Largest UDP payload over IPv4 (65,535 − 20 IP − 8 UDP).
pub const MAX_DATAGRAM: usize = 65_507;
/// Bytes the authenticated link adds after the packet (`transport::auth`).
pub const TRAILER_LEN: usize = 32;
/// The flags bit saying the payload is encrypted (`transport::auth::Protection`).
pub const FLAG_ENCRYPTED: u8 = 0x01;
/// Largest data payload one packet can carry.
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - HEADER_LEN - TRAILER_LEN;

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("packet of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated(usize),
    #[error("bad magic number {0:#06x}")]
    BadMagic(u16),
    #[error("wire version {got} not supported (this agent speaks version {VERSION})")]
    Version { got: u8 },
    #[error("unknown packet kind {0}")]
    BadKind(u8),
    #[error("payload length {declared} does not match the {actual} bytes present")]
    BadLength { declared: u32, actual: usize },
    #[error("fragment at offset {offset} of {len} bytes overruns its {msg_len}-byte message")]
    BadFragment { offset: u32, len: u32, msg_len: u32 },
    #[error("connection id zero in a {0:?} packet")]
    NoConnection(Kind),
    #[error("buffer too small to emit: need {need}, have {have}")]
    BufferTooSmall { need: usize, have: usize },
}

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const KIND: usize = 3;
    pub const PRIORITY: usize = 4;
    pub const FLAGS: usize = 5;
    pub const SRC_PORT: Range<usize> = 6..8;
    pub const DST_PORT: Range<usize> = 8..10;
    pub const RESERVED: Range<usize> = 10..12;
    pub const CONN: Range<usize> = 12..16;
    pub const RID: Range<usize> = 16..20;
    pub const W0: Range<usize> = 20..24;
    pub const W1: Range<usize> = 24..28;
    pub const W2: Range<usize> = 28..32;
    pub const W3: Range<usize> = 32..36;
    pub const W4: Range<usize> = 36..40;
}

/// Packet kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A fragment of a message.
    Data = 1,
    /// Cumulative + selective acknowledgement with the receiver's window.
    Ack = 2,
    /// Window probe: "tell me your window" (sent when the window is closed).
    Probe = 3,
    /// "I hold no state for the connection you name": the receiver lost it (restarted).
    Reset = 4,
}

/// A zero-copy view of a packet. After [`Packet::new_checked`] every accessor is safe.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks (accessors may panic on a short buffer).
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a buffer and validates magic, version, kind and lengths once.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Packet { buffer };
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated(b.len()));
        }
        if self.magic() != MAGIC {
            return Err(WireError::BadMagic(self.magic()));
        }
        if self.version() != VERSION {
            return Err(WireError::Version {
                got: self.version(),
            });
        }
        let kind = self.kind()?;
        let actual = b.len() - HEADER_LEN;
        match kind {
            Kind::Data => {
                let declared = be32(&b[field::W4]);
                if declared as usize != actual {
                    return Err(WireError::BadLength { declared, actual });
                }
                let (offset, msg_len) = (be32(&b[field::W3]), be32(&b[field::W2]));
                if u64::from(offset) + u64::from(declared) > u64::from(msg_len)
                    || (declared == 0 && msg_len != 0)
                {
                    return Err(WireError::BadFragment {
                        offset,
                        len: declared,
                        msg_len,
                    });
                }
            }
            Kind::Ack | Kind::Probe | Kind::Reset => {
                if actual != 0 {
                    return Err(WireError::BadLength {
                        declared: 0,
                        actual,
                    });
                }
            }
        }
        let ids = self.ids();
        if ids.conn == 0 || (kind == Kind::Ack && ids.rid == 0) {
            return Err(WireError::NoConnection(kind));
        }
        Ok(())
    }

    pub fn magic(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::MAGIC])
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn kind(&self) -> Result<Kind, WireError> {
        match self.buffer.as_ref()[field::KIND] {
            1 => Ok(Kind::Data),
            2 => Ok(Kind::Ack),
            3 => Ok(Kind::Probe),
            4 => Ok(Kind::Reset),
            k => Err(WireError::BadKind(k)),
        }
    }
    pub fn priority(&self) -> u8 {
        self.buffer.as_ref()[field::PRIORITY]
    }
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }
    fn word(&self, r: std::ops::Range<usize>) -> u32 {
        be32(&self.buffer.as_ref()[r])
    }
    /// The connection and receiver ids.
    pub fn ids(&self) -> ConnIds {
        ConnIds {
            conn: self.word(field::CONN),
            rid: self.word(field::RID),
        }
    }
    /// The payload (empty for acks and probes).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

/// The flow a packet belongs to, as seen from the packet (GM's sub-port pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowTag {
    pub src_port: u16,
    pub dst_port: u16,
    pub priority: u8,
}

/// The connection a packet belongs to: the sender's connection id and a receiver id
/// (see the module documentation for what each kind of packet puts there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConnIds {
    pub conn: u32,
    pub rid: u32,
}

/// What an acknowledgement says about a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckInfo {
    /// Cumulative ack: every sequence before it has arrived.
    pub cum: u32,
    /// First sequence the sender may not send.
    pub window: u32,
    /// Arrivals after `cum`: bit i is sequence cum + 1 + i.
    pub sack: u64,
    /// Every sequence before it has been taken by the receiving port (at most `cum`):
    /// a message's send completes when all its packets are taken.
    pub delivered: u32,
}

/// The header of a data packet whose payload the caller places (or gathers) itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    pub tag: FlowTag,
    pub ids: ConnIds,
    pub seq: u32,
    pub msg_seq: u32,
    pub msg_len: u32,
    pub offset: u32,
    pub len: u32,
}

impl DataHeader {
    /// Writes the header; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let words = [self.seq, self.msg_seq, self.msg_len, self.offset, self.len];
        write_header(buf, Kind::Data, self.tag, self.ids, words)
    }
}

fn write_header(
    buf: &mut [u8],
    kind: Kind,
    tag: FlowTag,
    ids: ConnIds,
    words: [u32; 5],
) -> Result<usize, WireError> {
    if buf.len() < HEADER_LEN {
        return Err(WireError::BufferTooSmall {
            need: HEADER_LEN,
            have: buf.len(),
        });
    }
    buf[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
    buf[field::VERSION] = VERSION;
    buf[field::KIND] = kind as u8;
    buf[field::PRIORITY] = tag.priority;
    buf[field::FLAGS] = 0;
    buf[field::SRC_PORT].copy_from_slice(&tag.src_port.to_be_bytes());
    buf[field::DST_PORT].copy_from_slice(&tag.dst_port.to_be_bytes());
    buf[field::RESERVED].copy_from_slice(&[0, 0]);
    buf[field::CONN].copy_from_slice(&ids.conn.to_be_bytes());
    buf[field::RID].copy_from_slice(&ids.rid.to_be_bytes());
    for (i, w) in words.iter().enumerate() {
        let at = field::W0.start + 4 * i;
        buf[at..at + 4].copy_from_slice(&w.to_be_bytes());
    }
    Ok(HEADER_LEN)
}

/// Parsed form of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    Data {
        tag: FlowTag,
        ids: ConnIds,
        seq: u32,
        msg_seq: u32,
        msg_len: u32,
        offset: u32,
        payload: &'a [u8],
    },
    Ack {
        tag: FlowTag,
        ids: ConnIds,
        ack: AckInfo,
    },
    Probe {
        tag: FlowTag,
        ids: ConnIds,
    },
    Reset {
        tag: FlowTag,
        ids: ConnIds,
    },
}

impl<'a> Repr<'a> {
    /// Parses a checked packet.
    pub fn parse(packet: &Packet<&'a [u8]>) -> Result<Repr<'a>, WireError> {
        let bytes: &'a [u8] = packet.buffer;
        let tag = FlowTag {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            priority: packet.priority(),
        };
        let w = |r| packet.word(r);
        let ids = packet.ids();
        Ok(match packet.kind()? {
            Kind::Data => Repr::Data {
                tag,
                ids,
                seq: w(field::W0),
                msg_seq: w(field::W1),
                msg_len: w(field::W2),
                offset: w(field::W3),
                payload: &bytes[HEADER_LEN..],
            },
            Kind::Ack => Repr::Ack {
                tag,
                ids,
                ack: AckInfo {
                    cum: w(field::W0),
                    window: w(field::W1),
                    sack: (u64::from(w(field::W3)) << 32) | u64::from(w(field::W2)),
                    delivered: w(field::W4),
                },
            },
            Kind::Probe => Repr::Probe { tag, ids },
            Kind::Reset => Repr::Reset { tag, ids },
        })
    }

    /// Validates and parses a raw datagram in one step.
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<Repr<'a>, WireError> {
        Repr::parse(&Packet::new_checked(bytes)?)
    }

    pub fn tag(&self) -> FlowTag {
        match *self {
            Repr::Data { tag, .. }
            | Repr::Ack { tag, .. }
            | Repr::Probe { tag, .. }
            | Repr::Reset { tag, .. } => tag,
        }
    }

    pub fn ids(&self) -> ConnIds {
        match *self {
            Repr::Data { ids, .. }
            | Repr::Ack { ids, .. }
            | Repr::Probe { ids, .. }
            | Repr::Reset { ids, .. } => ids,
        }
    }

    /// Bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Data { payload, .. } => HEADER_LEN + payload.len(),
            _ => HEADER_LEN,
        }
    }

    /// Writes the header only (the payload of a data packet is left for the caller to
    /// place at `HEADER_LEN..`, so a fragment can be copied straight from its buffer).
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let (kind, words) = match *self {
            Repr::Data {
                seq,
                msg_seq,
                msg_len,
                offset,
                payload,
                ..
            } => (
                Kind::Data,
                [seq, msg_seq, msg_len, offset, payload.len() as u32],
            ),
            Repr::Ack { ack, .. } => (
                Kind::Ack,
                [
                    ack.cum,
                    ack.window,
                    ack.sack as u32,
                    (ack.sack >> 32) as u32,
                    ack.delivered,
                ],
            ),
            Repr::Probe { .. } => (Kind::Probe, [0; 5]),
            Repr::Reset { .. } => (Kind::Reset, [0; 5]),
        };
        write_header(buf, kind, self.tag(), self.ids(), words)
    }

    /// Writes the whole packet; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let need = self.buffer_len();
        if buf.len() < need {
            return Err(WireError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        self.emit_header(buf)?;
        if let Repr::Data { payload, .. } = self {
            buf[HEADER_LEN..need].copy_from_slice(payload);
        }
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TAG: FlowTag = FlowTag {
        src_port: 3,
        dst_port: 9,
        priority: 1,
    };
    const IDS: ConnIds = ConnIds {
        conn: 0xfeed_0001,
        rid: 0x0bad_cafe,
    };

    #[test]
    fn data_round_trips_through_emit_and_parse() {
        let payload = b"hello world";
        let r = Repr::Data {
            tag: TAG,
            ids: IDS,
            seq: 7,
            msg_seq: 2,
            msg_len: 100,
            offset: 50,
            payload,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut buf).unwrap(), HEADER_LEN + payload.len());
        assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn ack_round_trips_with_full_sack_bitmap() {
        let r = Repr::Ack {
            tag: TAG,
            ids: IDS,
            ack: AckInfo {
                cum: 1 << 31,
                window: 12,
                sack: 0xdead_beef_0123_4567,
                delivered: (1 << 31) - 5,
            },
        };
        let mut buf = [0u8; HEADER_LEN];
        r.emit(&mut buf).unwrap();
        assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
    }

    #[test]
    fn other_version_is_refused_with_both_versions_named() {
        let r = Repr::Probe { tag: TAG, ids: IDS };
        let mut buf = [0u8; HEADER_LEN];
        r.emit(&mut buf).unwrap();
        buf[2] = 1;
        let e = Repr::parse_bytes(&buf).unwrap_err();
        assert_eq!(e, WireError::Version { got: 1 });
        assert!(e.to_string().contains("version 1") && e.to_string().contains("version 3"));
    }

    #[test]
    fn fragment_past_message_end_is_refused() {
        let r = Repr::Data {
            tag: TAG,
            ids: IDS,
            seq: 0,
            msg_seq: 0,
            msg_len: 10,
            offset: 8,
            payload: b"abc",
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        assert!(matches!(
            Repr::parse_bytes(&buf),
            Err(WireError::BadFragment { .. })
        ));
    }

    #[test]
    fn truncated_data_packet_is_refused() {
        let r = Repr::Data {
            tag: TAG,
            ids: IDS,
            seq: 0,
            msg_seq: 0,
            msg_len: 10,
            offset: 0,
            payload: b"abcdefghij",
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        assert!(matches!(
            Repr::parse_bytes(&buf[..buf.len() - 1]),
            Err(WireError::BadLength { .. })
        ));
        assert!(matches!(
            Repr::parse_bytes(&buf[..5]),
            Err(WireError::Truncated(5))
        ));
    }

    #[test]
    fn a_data_header_emitted_alone_matches_the_whole_packets() {
        let payload = b"0123456789";
        let r = Repr::Data {
            tag: TAG,
            ids: IDS,
            seq: 3,
            msg_seq: 4,
            msg_len: 20,
            offset: 10,
            payload,
        };
        let mut whole = vec![0u8; r.buffer_len()];
        r.emit(&mut whole).unwrap();
        let h = DataHeader {
            tag: TAG,
            ids: IDS,
            seq: 3,
            msg_seq: 4,
            msg_len: 20,
            offset: 10,
            len: 10,
        };
        let mut head = [0u8; HEADER_LEN];
        assert_eq!(h.emit(&mut head), Ok(HEADER_LEN));
        assert_eq!(&whole[..HEADER_LEN], &head[..]);
    }

    #[test]
    fn probe_and_reset_round_trip_with_their_connection_ids() {
        for r in [
            Repr::Probe { tag: TAG, ids: IDS },
            Repr::Reset { tag: TAG, ids: IDS },
            Repr::Probe {
                tag: TAG,
                ids: ConnIds { conn: 5, rid: 0 },
            },
        ] {
            let mut buf = [0u8; HEADER_LEN];
            r.emit(&mut buf).unwrap();
            assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
        }
    }

    #[test]
    fn a_packet_without_a_connection_or_an_ack_without_a_receiver_is_refused() {
        let no_conn = ConnIds { conn: 0, rid: 7 };
        let mut buf = [0u8; HEADER_LEN];
        Repr::Probe {
            tag: TAG,
            ids: no_conn,
        }
        .emit(&mut buf)
        .unwrap();
        assert_eq!(
            Repr::parse_bytes(&buf),
            Err(WireError::NoConnection(Kind::Probe))
        );
        Repr::Ack {
            tag: TAG,
            ids: ConnIds { conn: 7, rid: 0 },
            ack: AckInfo::default(),
        }
        .emit(&mut buf)
        .unwrap();
        assert_eq!(
            Repr::parse_bytes(&buf),
            Err(WireError::NoConnection(Kind::Ack))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_parser(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = Repr::parse_bytes(&bytes);
        }

        #[test]
        fn valid_headers_with_random_words_never_panic(words in proptest::array::uniform7(any::<u32>()), kind in 0u8..6, extra in 0usize..8) {
            let mut buf = vec![0u8; HEADER_LEN + extra];
            buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
            buf[2] = VERSION;
            buf[3] = kind;
            for (i, w) in words.iter().enumerate() {
                buf[12 + 4 * i..16 + 4 * i].copy_from_slice(&w.to_be_bytes());
            }
            if let Ok(Repr::Data { offset, payload, msg_len, .. }) = Repr::parse_bytes(&buf) {
                prop_assert!(u64::from(offset) + payload.len() as u64 <= u64::from(msg_len));
            }
        }
    }
}
