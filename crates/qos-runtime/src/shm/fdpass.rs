//! Unix-socket plumbing for port set-up (GM's driver role, thesis §4.1): one datagram
//! per message on a SOCK_SEQPACKET socket, descriptors passed with SCM_RIGHTS, and the
//! caller's identity from SO_PEERCRED. Built on rustix: no `unsafe` here.

use std::io;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    self, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

/// Most descriptors one message carries.
pub const MAX_FDS: usize = 4;

/// Sends `data` with `fds` attached (at most [`MAX_FDS`]).
pub fn send_with_fds(sock: impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} descriptors, at most {MAX_FDS}", fds.len()),
        ));
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("no room for the descriptors"));
    }
    net::sendmsg(
        sock,
        &[IoSlice::new(data)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// Receives one message (up to `buf.len()` bytes) and any descriptors attached.
/// `Ok((0, []))` means the peer closed.
pub fn recv_with_fds(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = net::recvmsg(
        sock,
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = m {
            fds.extend(received);
        }
    }
    Ok((msg.bytes, fds))
}

/// The connecting process's (pid, uid, gid).
pub fn peer_cred(sock: impl AsFd) -> io::Result<(u32, u32, u32)> {
    let c = net::sockopt::socket_peercred(sock)?;
    Ok((
        c.pid.as_raw_nonzero().get() as u32,
        c.uid.as_raw(),
        c.gid.as_raw(),
    ))
}

/// Creates a SOCK_SEQPACKET Unix socket (listening when `listen`), bound or connected to `path`.
pub fn seqpacket(path: &std::path::Path, listen: bool) -> io::Result<OwnedFd> {
    let fd = net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let addr = SocketAddrUnix::new(path)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "socket path too long"))?;
    if listen {
        net::bind(&fd, &addr)?;
        net::listen(&fd, 64)?;
    } else {
        net::connect(&fd, &addr)?;
    }
    Ok(fd)
}

/// Accepts one connection (non-blocking listener: `Ok(None)` when none waits).
pub fn accept(listener: impl AsFd) -> io::Result<Option<OwnedFd>> {
    match net::accept_with(listener, SocketFlags::CLOEXEC) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::AGAIN) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Sets O_NONBLOCK.
pub fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    rustix::io::ioctl_fionbio(fd, true)?;
    Ok(())
}

/// Waits up to `timeout` (`None`: for ever) until one of `fds` is readable or hung up,
/// and says which are. An interrupted wait returns with none ready.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout: Option<std::time::Duration>) -> Vec<bool> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut p: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let ts = timeout.map(|t| rustix::event::Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    match poll(&mut p, ts.as_ref()) {
        Ok(n) if n > 0 => p.iter().map(|x| !x.revents().is_empty()).collect(),
        _ => vec![false; fds.len()],
    }
}

/// Whether `fd` is readable or hung up now.
pub fn ready(fd: impl AsFd) -> bool {
    wait_readable(&[fd.as_fd()], Some(std::time::Duration::ZERO))[0]
}
