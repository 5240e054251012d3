//! Trunk selection: which trunk carries a new stream.
//!
//! The default policy is scheme #1 of the IMPI relay paper: the trunk is
//! chosen by the destination host, so every stream to one host uses one
//! trunk (and one relay), and trunks share the hosts. It uses rendezvous
//! (highest random weight) hashing: each candidate trunk scores
//! `score(key, host)` and the highest score wins. When a trunk is added or
//! lost, only the hosts that it wins (or won) move; all other hosts keep
//! their trunk.
//!
//! The hash is defined byte-exactly so that C (the shim, which picks a
//! relay of its own cluster the same way with `key` = the relay's index in
//! its cluster's relay list) can compute the same choice:
//!
//! ```text
//! host bytes  = the 4 octets of an IPv4 address, or the 16 of an IPv6 one
//!               (an IPv4-mapped IPv6 address ::ffff:a.b.c.d counts as IPv4)
//! fnv1a64(b)  = h = 0xcbf29ce484222325; for each byte: h ^= byte; h *= 0x100000001b3
//! mix64(z)    = z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27;
//!               z *= 0x94d049bb133111eb; z ^= z >> 31          (all mod 2^64)
//! score(k, h) = mix64(fnv1a64(host bytes) ^ mix64(k))
//! ```
//!
//! The alternative policy, [`Policy::LeastLoaded`], sends each new stream
//! to the usable trunk with the least load (the caller's figure, e.g.
//! buffered send bytes or open streams), ties broken by the score above.
//! It balances better when a few hosts carry most of the traffic but
//! spreads one host's streams over several trunks.

use std::net::IpAddr;

/// How to choose a trunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// By destination host (rendezvous hashing); IMPI relay scheme #1.
    #[default]
    DestinationHost,
    /// The usable trunk with the smallest load.
    LeastLoaded,
}

/// One trunk the caller could use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrunkCandidate {
    /// A stable identifier of the trunk (the same across restarts and on
    /// every relay that must agree), e.g. its index in the topology.
    pub key: u64,
    /// Load, for [`Policy::LeastLoaded`]; ignored otherwise.
    pub load: u64,
    /// Whether the trunk can take a new stream now (established, not going
    /// away, below its stream limit).
    pub usable: bool,
}

/// Chooses trunks with a [`Policy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrunkSelector {
    /// The policy.
    pub policy: Policy,
}

impl TrunkSelector {
    /// A selector with `policy`.
    pub fn new(policy: Policy) -> TrunkSelector {
        TrunkSelector { policy }
    }

    /// The index in `candidates` of the trunk for a new stream to
    /// `destination`, or `None` if no candidate is usable.
    pub fn select(&self, candidates: &[TrunkCandidate], destination: IpAddr) -> Option<usize> {
        let host = host_hash(destination);
        let usable = candidates.iter().enumerate().filter(|(_, c)| c.usable);
        match self.policy {
            // max_by_key keeps the last maximum; reverse so the first wins ties.
            Policy::DestinationHost => usable
                .rev()
                .max_by_key(|(_, c)| score_hashed(c.key, host))
                .map(|(i, _)| i),
            Policy::LeastLoaded => usable
                .rev()
                .max_by_key(|(_, c)| (std::cmp::Reverse(c.load), score_hashed(c.key, host)))
                .map(|(i, _)| i),
        }
    }
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The SplitMix64 finalizer.
pub fn mix64(mut z: u64) -> u64 {
    z ^= z >> 30;
    z = z.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 27;
    z = z.wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `fnv1a64` of the host's address bytes (IPv4-mapped IPv6 as IPv4).
pub fn host_hash(host: IpAddr) -> u64 {
    match host.to_canonical() {
        IpAddr::V4(v4) => fnv1a64(&v4.octets()),
        IpAddr::V6(v6) => fnv1a64(&v6.octets()),
    }
}

/// The rendezvous score of trunk `key` for `host`.
pub fn score(key: u64, host: IpAddr) -> u64 {
    score_hashed(key, host_hash(host))
}

fn score_hashed(key: u64, host_hash: u64) -> u64 {
    mix64(host_hash ^ mix64(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(n: u64) -> Vec<TrunkCandidate> {
        (0..n)
            .map(|key| TrunkCandidate {
                key,
                load: 0,
                usable: true,
            })
            .collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hash_test_vectors_for_the_c_side() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161d_100b_05e5);
        assert_eq!(host_hash(ip("10.1.0.3")), fnv1a64(&[10, 1, 0, 3]));
        assert_eq!(host_hash(ip("::ffff:10.1.0.3")), host_hash(ip("10.1.0.3")));
        assert_eq!(score(0, ip("10.1.0.3")), 0xecb7_6ca9_6db0_982d);
        assert_eq!(score(1, ip("10.1.0.3")), 0xc90e_1b75_8e86_1514);
    }

    #[test]
    fn destination_host_is_deterministic_and_sticky() {
        let s = TrunkSelector::default();
        let c = cands(4);
        for i in 0..50u8 {
            let h = IpAddr::from([10, 1, 0, i]);
            let a = s.select(&c, h).unwrap();
            assert_eq!(s.select(&c, h), Some(a));
            // Loads do not matter for this policy.
            let mut loaded = c.clone();
            loaded[a].load = 1 << 40;
            assert_eq!(s.select(&loaded, h), Some(a));
        }
    }

    #[test]
    fn destination_host_spreads_hosts_over_trunks() {
        let s = TrunkSelector::default();
        let c = cands(4);
        let mut count = [0u32; 4];
        for i in 0..=255u8 {
            for j in 0..4u8 {
                count[s.select(&c, IpAddr::from([10, j, 0, i])).unwrap()] += 1;
            }
        }
        for n in count {
            assert!((180..=340).contains(&n), "{count:?}");
        }
    }

    #[test]
    fn losing_a_trunk_moves_only_its_hosts() {
        let s = TrunkSelector::default();
        let mut c = cands(4);
        let hosts: Vec<IpAddr> = (0..200u8).map(|i| IpAddr::from([10, 2, 0, i])).collect();
        let before: Vec<usize> = hosts.iter().map(|&h| s.select(&c, h).unwrap()).collect();
        c[2].usable = false;
        for (h, b) in hosts.iter().zip(before) {
            let after = s.select(&c, *h).unwrap();
            assert_ne!(after, 2);
            if b != 2 {
                assert_eq!(after, b);
            }
        }
        c.iter_mut().for_each(|t| t.usable = false);
        assert_eq!(s.select(&c, hosts[0]), None);
    }

    #[test]
    fn least_loaded_picks_min_load_with_deterministic_ties() {
        let s = TrunkSelector::new(Policy::LeastLoaded);
        let mut c = cands(3);
        c[0].load = 5;
        c[1].load = 2;
        c[2].load = 9;
        assert_eq!(s.select(&c, ip("10.1.0.1")), Some(1));
        c[1].usable = false;
        assert_eq!(s.select(&c, ip("10.1.0.1")), Some(0));
        let tied = cands(3);
        let h = ip("10.1.0.7");
        assert_eq!(
            s.select(&tied, h),
            TrunkSelector::new(Policy::DestinationHost).select(&tied, h)
        );
    }
}
