//! The sending half of the authenticated link's AES-128-GCM: a thin owner of one of
//! AWS-LC's `EVP_CIPHER_CTX` (through `aws-lc-sys`), used because a datagram's parts
//! are not contiguous — the header on the agent's stack, the payload in a port's shared
//! memory — and the one-shot AEAD interfaces want one associated-data slice and one
//! plaintext slice. GCM's incremental interface takes the associated data in pieces and
//! encrypts out of place, so
//!
//! - authenticating a datagram reads its payload where it lies (no copy: the kernel's
//!   `sendmsg` reads it again from there), and
//! - encrypting it reads the payload once, writing the ciphertext into the agent's own
//!   buffer (the copy out of shared memory and the encryption are one pass).
//!
//! The payload is handed over as a raw pointer and length, never as a Rust slice:
//! another process may write that memory at any time (see `link::SharedBytes`). What
//! GCM reads of it is what it authenticates; if the application changes its buffer
//! while the kernel copies it, the receiver's check fails and the datagram is dropped
//! like a lost one (only that application's own message suffers).
//!
//! The receiving side opens with `aws-lc-rs`'s safe one-shot interface: there the
//! datagram is contiguous in the agent's own receive buffer.

use std::os::raw::c_int;
use std::ptr;

use aws_lc_sys as sys;

/// Tag bytes.
pub const TAG_LEN: usize = 16;
/// Nonce bytes (GCM's 96-bit IV).
pub const NONCE_LEN: usize = 12;

/// Bytes GCM reads, given as a pointer and a length.
#[derive(Debug, Clone, Copy)]
pub struct Piece {
    ptr: *const u8,
    len: usize,
}

impl Piece {
    /// Bytes of the agent's own memory.
    pub fn local(b: &[u8]) -> Piece {
        Piece {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }

    /// # Safety
    /// `ptr..ptr + len` must be mapped and readable while the piece is used.
    pub unsafe fn raw(ptr: *const u8, len: usize) -> Piece {
        Piece { ptr, len }
    }
}

/// What went wrong inside the library (a length beyond `c_int`, an allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcmError;

/// One AES-128-GCM sealing context for one key (one peer and direction).
pub struct Sealer {
    ctx: *mut sys::EVP_CIPHER_CTX,
}

// SAFETY: the context is owned by this value alone and only used through `&mut self`.
unsafe impl Send for Sealer {}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from EVP_CIPHER_CTX_new and is freed once (it also wipes
        // the key schedule).
        unsafe { sys::EVP_CIPHER_CTX_free(self.ctx) }
    }
}

fn check(r: c_int) -> Result<(), GcmError> {
    if r == 1 {
        Ok(())
    } else {
        Err(GcmError)
    }
}

impl Sealer {
    /// A context holding the expanded `key`.
    pub fn new(key: &[u8; 16]) -> Result<Sealer, GcmError> {
        // SAFETY: a fresh context is set up with AES-128-GCM and a 16-byte key (the
        // cipher's key length); a null context is reported, not used.
        unsafe {
            let ctx = sys::EVP_CIPHER_CTX_new();
            if ctx.is_null() {
                return Err(GcmError);
            }
            let s = Sealer { ctx };
            check(sys::EVP_EncryptInit_ex(
                s.ctx,
                sys::EVP_aes_128_gcm(),
                ptr::null_mut(),
                key.as_ptr(),
                ptr::null(),
            ))?;
            Ok(s)
        }
    }

    /// Authenticates `aad` (in order, as one string) and encrypts `plain` into
    /// `out[..plain.len()]` (nothing when `plain` is empty); returns the tag.
    pub fn seal(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[Piece],
        plain: Piece,
        out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], GcmError> {
        if out.len() < plain.len {
            return Err(GcmError);
        }
        let mut n: c_int = 0;
        let mut tag = [0u8; TAG_LEN];
        // SAFETY: the context holds a key (`new`); the nonce is NONCE_LEN bytes, GCM's
        // default IV length; every piece is readable for its length (`Piece`'s
        // constructors); the output has room for the plaintext's length (checked above)
        // and GCM writes exactly that many bytes, and none at the final call; the tag
        // buffer is TAG_LEN bytes.
        unsafe {
            check(sys::EVP_EncryptInit_ex(
                self.ctx,
                ptr::null(),
                ptr::null_mut(),
                ptr::null(),
                nonce.as_ptr(),
            ))?;
            for p in aad.iter().filter(|p| p.len > 0) {
                let len = c_int::try_from(p.len).map_err(|_| GcmError)?;
                check(sys::EVP_EncryptUpdate(
                    self.ctx,
                    ptr::null_mut(),
                    &mut n,
                    p.ptr,
                    len,
                ))?;
            }
            if plain.len > 0 {
                let len = c_int::try_from(plain.len).map_err(|_| GcmError)?;
                check(sys::EVP_EncryptUpdate(
                    self.ctx,
                    out.as_mut_ptr(),
                    &mut n,
                    plain.ptr,
                    len,
                ))?;
            }
            check(sys::EVP_EncryptFinal_ex(self.ctx, out.as_mut_ptr(), &mut n))?;
            check(sys::EVP_CIPHER_CTX_ctrl(
                self.ctx,
                sys::EVP_CTRL_GCM_GET_TAG as c_int,
                TAG_LEN as c_int,
                tag.as_mut_ptr().cast(),
            ))?;
        }
        Ok(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};

    fn one_shot(key: &[u8; 16]) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_128_GCM, key).unwrap())
    }

    #[test]
    fn pieces_of_associated_data_make_the_one_shot_tag() {
        let key = [5u8; 16];
        let nonce = [9u8; NONCE_LEN];
        let whole: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mut s = Sealer::new(&key).unwrap();
        // Uneven pieces (not multiples of the 16-byte block), and an empty one.
        let pieces = [
            Piece::local(&whole[..40]),
            Piece::local(&whole[40..40]),
            Piece::local(&whole[40..2999]),
            Piece::local(&whole[2999..]),
        ];
        let tag = s.seal(&nonce, &pieces, Piece::local(&[]), &mut []).unwrap();
        let expect = one_shot(&key)
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&whole[..]),
                &mut [],
            )
            .unwrap();
        assert_eq!(&tag[..], expect.as_ref());
        // The context is reused for the next datagram with a new nonce.
        let tag2 = s
            .seal(&[1; NONCE_LEN], &pieces, Piece::local(&[]), &mut [])
            .unwrap();
        assert_ne!(tag, tag2);
    }

    #[test]
    fn out_of_place_encryption_opens_with_the_one_shot_interface() {
        let key = [6u8; 16];
        let nonce = [3u8; NONCE_LEN];
        let head = [1u8; 40];
        let plain: Vec<u8> = (0..65_000u32).map(|i| i as u8).collect();
        let mut out = vec![0u8; plain.len()];
        let tag = Sealer::new(&key)
            .unwrap()
            .seal(
                &nonce,
                &[Piece::local(&head)],
                Piece::local(&plain),
                &mut out,
            )
            .unwrap();
        assert_ne!(out, plain);
        let opened = one_shot(&key)
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&head[..]),
                &tag,
                &mut out,
            )
            .unwrap()
            .to_vec();
        assert_eq!(opened, plain);
    }

    #[test]
    fn a_short_output_is_refused() {
        let mut s = Sealer::new(&[0; 16]).unwrap();
        assert_eq!(
            s.seal(&[0; NONCE_LEN], &[], Piece::local(&[1, 2, 3]), &mut [0; 2]),
            Err(GcmError)
        );
    }
}
