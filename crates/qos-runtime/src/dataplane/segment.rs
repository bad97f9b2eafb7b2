//! Segmentation of messages into packets (thesis §4.2 / §5.2: all packets of a message
//! but the last are full-sized). The default packet size comes from the path MTU so that
//! no packet is ever fragmented by IP.

use std::net::SocketAddr;

use crate::transport::wire::{HEADER_LEN, MAX_PAYLOAD, TRAILER_LEN};

/// IPv4 + UDP header bytes in front of our header.
pub const IP_UDP_OVERHEAD: usize = 28;

/// Largest payload per packet for a path MTU, so the datagram (header, payload and
/// authentication trailer) fits one IP packet.
pub fn payload_for_mtu(mtu: usize) -> usize {
    mtu.saturating_sub(IP_UDP_OVERHEAD + HEADER_LEN + TRAILER_LEN)
        .clamp(1, MAX_PAYLOAD)
}

/// Path MTU towards `peer` as the kernel knows it (IP_MTU on a connected UDP socket);
/// `None` if the kernel will not say.
pub fn path_mtu(peer: SocketAddr) -> Option<usize> {
    use rustix::net::sockopt;
    let s = std::net::UdpSocket::bind(if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    })
    .ok()?;
    s.connect(peer).ok()?;
    let mtu = if peer.is_ipv4() {
        sockopt::ip_mtu(&s)
    } else {
        sockopt::ipv6_mtu(&s)
    };
    mtu.ok().filter(|&m| m > 0).map(|m| m as usize)
}

/// Packets a message of `len` bytes takes (a zero-length message still takes one).
pub fn packet_count(len: usize, payload: usize) -> u32 {
    len.div_ceil(payload.max(1)).max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_mtu_leaves_room_for_all_headers() {
        assert_eq!(payload_for_mtu(1500), 1500 - 28 - 40 - 32);
        assert_eq!(
            payload_for_mtu(65536),
            MAX_PAYLOAD,
            "loopback is capped by UDP's maximum"
        );
    }

    #[test]
    fn loopback_path_mtu_is_known() {
        let m = path_mtu("127.0.0.1:9".parse().unwrap()).unwrap();
        assert!(m >= 1500, "{m}");
    }

    #[test]
    fn message_segment_counts() {
        assert_eq!(packet_count(0, 100), 1);
        assert_eq!(packet_count(100, 100), 1);
        assert_eq!(packet_count(101, 100), 2);
        assert_eq!(packet_count(65536, 4096), 16);
    }
}
