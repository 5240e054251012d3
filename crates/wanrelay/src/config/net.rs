//! Networks in the configuration: `inside.members`, a peer's `reachable`.

use std::net::IpAddr;

/// An IPv4 or IPv6 network (address and prefix length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    /// Network address (host bits zero).
    pub network: IpAddr,
    /// Prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n`, `x::y/n`, or a single address (a /32 or /128).
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR (e.g. \"10.1.0.0/24\")"))?;
        let ip = ip.to_canonical();
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("{s:?}: prefix length must be 0..={max}"))?,
        };
        let network = mask(ip, prefix);
        if network != ip {
            return Err(format!(
                "{s:?} has host bits set (the network is {network}/{prefix})"
            ));
        }
        Ok(Cidr { network, prefix })
    }

    /// Whether `ip` is inside this network (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.prefix) == self.network
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

/// A set of networks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetSet(pub Vec<Cidr>);

impl NetSet {
    /// Whether any network contains `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// The longest prefix containing `ip`, if any.
    pub fn longest_match(&self, ip: IpAddr) -> Option<u8> {
        self.0
            .iter()
            .filter(|c| c.contains(ip))
            .map(|c| c.prefix)
            .max()
    }
}
