//! What authenticating a datagram costs per byte on this machine's CPU, for the
//! data plane's choice of MAC (docs/dataplane.md, "What authentication costs"): the
//! candidates over a 65,400-byte payload (the largest datagram), each with the payload
//! hot in this core's cache and freshly written by another core (the sending agent
//! reads what the application wrote into shared memory from another core), and the
//! plain read of such a payload for comparison:
//!
//! - AES-128-GCM with the payload as associated data (GMAC, what the data plane's
//!   `authenticated` protection does), and encrypting a copy (the stitched AES-GCM
//!   path, `encrypted`), from AWS-LC;
//! - ChaCha20-Poly1305 with the payload as associated data (Poly1305) and encrypting
//!   in place, from AWS-LC;
//! - BLAKE3 keyed hashing (the `blake3` crate).
//!
//! Run: `cargo bench -p qos-runtime --bench mac [-- ITERATIONS]` (20,000 by default).
//! Prints ns per payload, GB/s and cycles per byte at the clock /proc/cpuinfo reports.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, CHACHA20_POLY1305};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const N: usize = 65_400;

fn nonce(i: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&i.to_le_bytes());
    Nonce::assume_unique_for_key(n)
}

type F = Box<dyn FnMut(&mut [u8], u64) -> u8>;

fn cands() -> Vec<(&'static str, F)> {
    let gcm = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).unwrap());
    let gcm2 = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).unwrap());
    let cp = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[7u8; 32]).unwrap());
    let cp2 = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[7u8; 32]).unwrap());
    let bk = [9u8; 32];
    let mut scratch = vec![0u8; N];
    vec![
        (
            "aws-lc GMAC (AES-128-GCM, payload as AAD)",
            Box::new(move |b: &mut [u8], i| {
                let t = gcm
                    .seal_in_place_separate_tag(nonce(i), Aad::from(&*b), &mut [])
                    .unwrap();
                t.as_ref()[0]
            }) as F,
        ),
        (
            "aws-lc AES-128-GCM encrypt (copy out, stitched)",
            Box::new(move |b: &mut [u8], i| {
                scratch.copy_from_slice(b);
                let t = gcm2
                    .seal_in_place_separate_tag(nonce(i), Aad::empty(), &mut scratch)
                    .unwrap();
                t.as_ref()[0]
            }),
        ),
        (
            "aws-lc Poly1305 (ChaCha20-Poly1305, payload as AAD)",
            Box::new(move |b: &mut [u8], i| {
                let t = cp
                    .seal_in_place_separate_tag(nonce(i), Aad::from(&*b), &mut [])
                    .unwrap();
                t.as_ref()[0]
            }),
        ),
        (
            "aws-lc ChaCha20-Poly1305 encrypt in place",
            Box::new(move |b: &mut [u8], i| {
                let t = cp2
                    .seal_in_place_separate_tag(nonce(i), Aad::empty(), b)
                    .unwrap();
                t.as_ref()[0]
            }),
        ),
        (
            "blake3 keyed hash",
            Box::new(move |b: &mut [u8], _| blake3::keyed_hash(&bk, b).as_bytes()[0]),
        ),
    ]
}

fn main() {
    // `cargo bench` passes `--bench`; a number among the arguments is the iterations.
    let iters: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20000);
    let mhz: f64 = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    println!("payload {N} B, {iters} iterations, cpu MHz {mhz}");
    // Hot: the same buffer again and again.
    for (name, mut f) in cands() {
        let mut buf = vec![0x5au8; N];
        let mut sink = 0u8;
        for i in 0..200 {
            sink ^= f(&mut buf, i);
        }
        let t = Instant::now();
        for i in 0..iters {
            sink ^= f(&mut buf, i + 1000);
        }
        let ns = t.elapsed().as_nanos() as f64 / iters as f64;
        println!(
            "hot   {name:55} {:7.0} ns/64KiB {:6.2} GB/s {:5.3} cycles/B  ({sink})",
            ns,
            N as f64 / ns,
            ns * mhz / 1000.0 / N as f64
        );
    }
    // Cold: another thread (the other core) writes the buffer, then this one MACs it.
    for (name, mut f) in cands() {
        let buf = Arc::new(std::sync::Mutex::new(vec![0u8; N]));
        let turn = Arc::new(AtomicU64::new(0));
        let (b2, t2) = (buf.clone(), turn.clone());
        let rounds = iters / 4;
        let writer = std::thread::spawn(move || {
            for r in 0..rounds {
                while t2.load(Ordering::Acquire) != 2 * r {
                    std::hint::spin_loop();
                }
                b2.lock().unwrap().fill(r as u8);
                t2.store(2 * r + 1, Ordering::Release);
            }
        });
        let mut total = 0u128;
        let mut sink = 0u8;
        for r in 0..rounds {
            while turn.load(Ordering::Acquire) != 2 * r + 1 {
                std::hint::spin_loop();
            }
            let mut g = buf.lock().unwrap();
            let t = Instant::now();
            sink ^= f(&mut g, r);
            total += t.elapsed().as_nanos();
            drop(g);
            turn.store(2 * r + 2, Ordering::Release);
        }
        writer.join().unwrap();
        let ns = total as f64 / rounds as f64;
        println!(
            "cold  {name:55} {:7.0} ns/64KiB {:6.2} GB/s {:5.3} cycles/B  ({sink})",
            ns,
            N as f64 / ns,
            ns * mhz / 1000.0 / N as f64
        );
    }
    // The memory read alone, cold: sum of the buffer's u64 words.
    {
        let buf = Arc::new(std::sync::Mutex::new(vec![0u8; N]));
        let turn = Arc::new(AtomicU64::new(0));
        let (b2, t2) = (buf.clone(), turn.clone());
        let rounds = iters / 4;
        let writer = std::thread::spawn(move || {
            for r in 0..rounds {
                while t2.load(Ordering::Acquire) != 2 * r {
                    std::hint::spin_loop();
                }
                b2.lock().unwrap().fill(r as u8);
                t2.store(2 * r + 1, Ordering::Release);
            }
        });
        let mut total = 0u128;
        let mut sink = 0u64;
        for r in 0..rounds {
            while turn.load(Ordering::Acquire) != 2 * r + 1 {
                std::hint::spin_loop();
            }
            let g = buf.lock().unwrap();
            let t = Instant::now();
            sink = sink.wrapping_add(
                g.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .fold(0u64, |a, x| a ^ x),
            );
            total += t.elapsed().as_nanos();
            drop(g);
            turn.store(2 * r + 2, Ordering::Release);
        }
        writer.join().unwrap();
        let ns = total as f64 / rounds as f64;
        println!(
            "cold  {:55} {:7.0} ns/64KiB {:6.2} GB/s {:5.3} cycles/B  ({sink})",
            "read only (xor of u64 words)",
            ns,
            N as f64 / ns,
            ns * mhz / 1000.0 / N as f64
        );
    }
}
