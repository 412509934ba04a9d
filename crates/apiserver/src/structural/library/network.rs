//! kube's IP address and CIDR functions: `ip`, `isIP`, `ip.isCanonical`, `family`,
//! `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`,
//! `isGlobalUnicast`; `cidr`, `isCIDR`, `ip`, `masked`, `prefixLength`, `containsIP`,
//! `containsCIDR`; and `string` of either. As kube does, addresses with a zone and IPv4
//! addresses mapped into IPv6 are refused.

use std::net::IpAddr;
use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::{Outcome, error, opaque_arg, overload, string_arg};

const IP_TYPE_NAME: &str = "net.IP";
const CIDR_TYPE_NAME: &str = "net.CIDR";

/// An IP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip(IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE_NAME
    }
}

/// An IP prefix: an address and the number of leading bits that name the network (the
/// address's other bits may be set; `masked()` clears them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    address: IpAddr,
    bits: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE_NAME
    }
}

/// Reads an address as kube's `ip()` does; why not, in kube's words.
fn parse_ip(text: &str) -> Result<IpAddr, String> {
    if text.contains('%') {
        return Err(format!(
            "IP address {text:?} with zone value is not allowed"
        ));
    }
    let address: IpAddr = text.parse().map_err(|_| {
        format!("IP Address {text:?} parse error during conversion from string: ParseAddr({text:?}): unable to parse IP")
    })?;
    refuse_mapped(address, text)
}

/// `address`, unless it is an IPv4 address mapped into IPv6, which kube refuses.
fn refuse_mapped(address: IpAddr, text: &str) -> Result<IpAddr, String> {
    match address {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => {
            Err(format!("IPv4-mapped IPv6 address {text:?} is not allowed"))
        }
        _ => Ok(address),
    }
}

/// Reads a prefix as kube's `cidr()` does.
fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let wrong = || {
        format!(
            "network address {text:?} parse error during conversion from string: netip.ParsePrefix({text:?}): bad prefix"
        )
    };
    let (address, bits) = text.split_once('/').ok_or_else(wrong)?;
    if address.contains('%') {
        return Err(format!(
            "network address {text:?} with zone value is not allowed"
        ));
    }
    let address = refuse_mapped(address.parse().map_err(|_| wrong())?, text)?;
    // Decimal digits only, with no leading zero (as Go's `netip.ParsePrefix` reads them).
    let canonical =
        bits == "0" || (!bits.starts_with('0') && bits.bytes().all(|b| b.is_ascii_digit()));
    let bits: u8 = bits.parse().ok().filter(|_| canonical).ok_or_else(wrong)?;
    if bits > width(address) {
        return Err(wrong());
    }
    Ok(Cidr { address, bits })
}

/// The number of bits in an address of `address`'s family.
fn width(address: IpAddr) -> u8 {
    match address {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `address` with all but its first `bits` bits cleared.
fn mask(address: IpAddr, bits: u8) -> IpAddr {
    match address {
        IpAddr::V4(v4) => {
            let keep = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & keep).into())
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & keep).into())
        }
    }
}

impl Cidr {
    fn contains(self, address: IpAddr) -> bool {
        width(address) == width(self.address)
            && mask(address, self.bits) == mask(self.address, self.bits)
    }
}

/// Whether `address` is link-local multicast (`224.0.0.0/24`; `ff02::/16` with any flags, as Go
/// tests it).
fn is_link_local_multicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

/// Whether `address` is link-local unicast (`169.254.0.0/16`, `fe80::/10`).
fn is_link_local_unicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `IsGlobalUnicast`: not unspecified, loopback, multicast, link-local unicast, or the
/// IPv4 limited broadcast address.
fn is_global_unicast(address: IpAddr) -> bool {
    !(address.is_unspecified()
        || address.is_loopback()
        || address.is_multicast()
        || is_link_local_unicast(address)
        || address == IpAddr::V4(std::net::Ipv4Addr::BROADCAST))
}

fn ip_value(address: IpAddr) -> Value {
    Value::Opaque(Arc::new(Ip(address)))
}

fn text(value: String) -> Value {
    Value::String(Arc::new(value))
}

fn ip_of(name: &str, args: &[Value]) -> Result<IpAddr, ExecutionError> {
    opaque_arg::<Ip>(name, args, 0).map(|ip| ip.0)
}

fn ip_test(name: &str, args: &[Value], test: fn(IpAddr) -> bool) -> Outcome {
    Ok(Value::Bool(test(ip_of(name, args)?)))
}

/// The second argument as an address: an IP, or a string to read as one.
fn other_ip(name: &str, args: &[Value]) -> Result<IpAddr, ExecutionError> {
    match args.get(1) {
        Some(Value::String(text)) => parse_ip(text).map_err(|problem| error(name, problem)),
        _ => opaque_arg::<Ip>(name, args, 1).map(|ip| ip.0),
    }
}

/// The second argument as a prefix: a CIDR, or a string to read as one.
fn other_cidr(name: &str, args: &[Value]) -> Result<Cidr, ExecutionError> {
    match args.get(1) {
        Some(Value::String(text)) => parse_cidr(text).map_err(|problem| error(name, problem)),
        _ => opaque_arg::<Cidr>(name, args, 1).copied(),
    }
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(ip, "ip", |name, args| {
        parse_ip(string_arg(name, args, 0)?)
            .map(ip_value)
            .map_err(|problem| error(name, problem))
    });
    overload!(is_ip, "isIP", |name, args| Ok(Value::Bool(
        parse_ip(string_arg(name, args, 0)?).is_ok()
    )));
    overload!(is_canonical, "ip.isCanonical", |name, args| {
        let source = string_arg(name, args, 0)?;
        let address = parse_ip(source).map_err(|problem| error(name, problem))?;
        Ok(Value::Bool(address.to_string() == source))
    });
    overload!(family, "family", |name, args| {
        Ok(Value::Int(if ip_of(name, args)?.is_ipv4() { 4 } else { 6 }))
    });
    overload!(is_unspecified, "isUnspecified", |name, args| ip_test(
        name,
        args,
        |a| a.is_unspecified()
    ));
    overload!(is_loopback, "isLoopback", |name, args| ip_test(
        name,
        args,
        |a| a.is_loopback()
    ));
    overload!(is_ll_multicast, "isLinkLocalMulticast", |name, args| {
        ip_test(name, args, is_link_local_multicast)
    });
    overload!(is_ll_unicast, "isLinkLocalUnicast", |name, args| ip_test(
        name,
        args,
        is_link_local_unicast
    ));
    overload!(is_global, "isGlobalUnicast", |name, args| ip_test(
        name,
        args,
        is_global_unicast
    ));
    overload!(ip_string, "string", |name, args| Ok(text(
        ip_of(name, args)?.to_string()
    )));
    overload!(cidr, "cidr", |name, args| {
        parse_cidr(string_arg(name, args, 0)?)
            .map(|cidr| Value::Opaque(Arc::new(cidr)))
            .map_err(|problem| error(name, problem))
    });
    overload!(is_cidr, "isCIDR", |name, args| Ok(Value::Bool(
        parse_cidr(string_arg(name, args, 0)?).is_ok()
    )));
    overload!(cidr_ip, "ip", |name, args| Ok(ip_value(
        opaque_arg::<Cidr>(name, args, 0)?.address
    )));
    overload!(masked, "masked", |name, args| {
        let cidr = opaque_arg::<Cidr>(name, args, 0)?;
        let masked = Cidr {
            address: mask(cidr.address, cidr.bits),
            bits: cidr.bits,
        };
        Ok(Value::Opaque(Arc::new(masked)))
    });
    overload!(prefix_length, "prefixLength", |name, args| {
        Ok(Value::Int(i64::from(
            opaque_arg::<Cidr>(name, args, 0)?.bits,
        )))
    });
    overload!(contains_ip, "containsIP", |name, args| {
        let cidr = opaque_arg::<Cidr>(name, args, 0)?;
        Ok(Value::Bool(cidr.contains(other_ip(name, args)?)))
    });
    overload!(contains_cidr, "containsCIDR", |name, args| {
        let cidr = opaque_arg::<Cidr>(name, args, 0)?;
        let other = other_cidr(name, args)?;
        Ok(Value::Bool(
            other.bits >= cidr.bits && cidr.contains(other.address),
        ))
    });
    overload!(cidr_string, "string", |name, args| {
        let cidr = opaque_arg::<Cidr>(name, args, 0)?;
        Ok(text(format!("{}/{}", cidr.address, cidr.bits)))
    });
    let ip_type = || Type::new_opaque_type(IP_TYPE_NAME);
    let cidr_type = || Type::new_opaque_type(CIDR_TYPE_NAME);
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], ip)?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], is_ip)?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical",
        vec![STRING_TYPE],
        is_canonical,
    )?;
    env.add_overload("string", "ip_to_string", vec![ip_type()], ip_string)?;
    for (function, id, body) in [
        (
            "family",
            "ip_family",
            family as cel::common::functions::Function,
        ),
        ("isUnspecified", "ip_is_unspecified", is_unspecified),
        ("isLoopback", "ip_is_loopback", is_loopback),
        (
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            is_ll_multicast,
        ),
        (
            "isLinkLocalUnicast",
            "ip_is_link_local_unicast",
            is_ll_unicast,
        ),
        ("isGlobalUnicast", "ip_is_global_unicast", is_global),
    ] {
        env.add_member_overload(function, id, ip_type(), vec![], body)?;
    }
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], cidr)?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], is_cidr)?;
    env.add_overload("string", "cidr_to_string", vec![cidr_type()], cidr_string)?;
    env.add_member_overload("ip", "cidr_ip", cidr_type(), vec![], cidr_ip)?;
    env.add_member_overload("masked", "cidr_masked", cidr_type(), vec![], masked)?;
    env.add_member_overload(
        "prefixLength",
        "cidr_prefix_length",
        cidr_type(),
        vec![],
        prefix_length,
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_ip",
        cidr_type(),
        vec![ip_type()],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        cidr_type(),
        vec![STRING_TYPE],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        cidr_type(),
        vec![cidr_type()],
        contains_cidr,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        cidr_type(),
        vec![STRING_TYPE],
        contains_cidr,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};

    #[test]
    fn ip_functions_answer_as_kube_does() {
        assert_true(&[
            "isIP('10.0.0.1')",
            "isIP('fe80::1')",
            "!isIP('10.0.0.256')",
            "!isIP('::ffff:10.0.0.1')",
            "!isIP('fe80::1%eth0')",
            "ip('10.0.0.1').family() == 4",
            "ip('::1').family() == 6",
            "ip('127.0.0.1').isLoopback()",
            "ip('0.0.0.0').isUnspecified()",
            "ip('169.254.1.1').isLinkLocalUnicast()",
            "ip('224.0.0.5').isLinkLocalMulticast()",
            "ip('10.1.2.3').isGlobalUnicast()",
            "!ip('255.255.255.255').isGlobalUnicast()",
            "ip('10.0.0.1') == ip('10.0.0.1')",
            "string(ip('2001:db8:0:0::1')) == '2001:db8::1'",
            "ip.isCanonical('2001:db8::1')",
            "!ip.isCanonical('2001:DB8::1')",
        ]);
        assert!(
            eval("ip('::ffff:1.2.3.4')")
                .unwrap_err()
                .contains("IPv4-mapped IPv6 address")
        );
    }

    #[test]
    fn cidr_functions_answer_as_kube_does() {
        assert_true(&[
            "isCIDR('10.0.0.0/8')",
            "!isCIDR('10.0.0.0/33')",
            "!isCIDR('10.0.0.0')",
            "!isCIDR('10.0.0.0/+8')",
            "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
            "cidr('10.0.0.0/8').containsIP('10.1.2.3')",
            "!cidr('10.0.0.0/8').containsIP('11.0.0.1')",
            "!cidr('10.0.0.0/8').containsIP('::1')",
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')",
            "!cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
            "cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')",
            "cidr('10.0.0.0/8').prefixLength() == 8",
            "cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
            "string(cidr('fd00::/8')) == 'fd00::/8'",
        ]);
    }
}
