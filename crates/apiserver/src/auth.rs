//! Bearer-token authentication, as kube-apiserver's `--token-auth-file` does it for one token.
//!
//! With a token in [`RestConfig::token`](crate::rest::RestConfig::token), every request, over TCP
//! and through the in-process transport alike, must carry `Authorization: Bearer <token>`;
//! any other gets 401 `Unauthorized`. The health endpoints are no exception: kube-apiserver lets
//! anonymous requests reach them only with anonymous authentication on, which this server does
//! not have.
//!
//! The token is compared in constant time and never shown: its [`Debug`](std::fmt::Debug) output
//! is redacted, it has no `Display`, and no error message or log line holds it.

use std::fmt;
use std::str::FromStr;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use subtle::ConstantTimeEq;

/// A bearer token that requests must present; see the [module documentation](self).
///
/// ```
/// use ctrlkit_apiserver::BearerToken;
///
/// let token = BearerToken::new("s3cret-t0ken").unwrap();
/// assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
/// assert!(BearerToken::new("two words").is_err());
/// ```
#[derive(Clone)]
pub struct BearerToken(String);

/// Why a string cannot be a [`BearerToken`]. The message never holds the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is empty, which kube-apiserver never accepts.
    #[error("the token is empty")]
    Empty,
    /// The token holds a space, a control character or a non-ASCII character, which cannot be
    /// sent as `Authorization: Bearer <token>`.
    #[error("the token may hold only visible ASCII characters (no spaces or control characters)")]
    Invalid,
}

impl BearerToken {
    /// A token of visible ASCII characters (`!` to `~`), as an HTTP header carries it after
    /// `Bearer `.
    pub fn new(token: impl Into<String>) -> Result<Self, TokenError> {
        let token = token.into();
        if token.is_empty() {
            return Err(TokenError::Empty);
        }
        if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(TokenError::Invalid);
        }
        Ok(Self(token))
    }

    /// The token itself, for writing it where a client reads it (a kubeconfig). Keep it out of
    /// logs and messages.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the token, compared in constant time: how long it takes depends on
    /// the token's length only, not on how much of `presented` matches.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), presented)
    }

    /// Whether the request's headers carry the token as kube-apiserver reads a bearer token: the
    /// first `Authorization` header, trimmed, is `Bearer <token>` (the scheme in any case, and
    /// anything after a further space ignored).
    pub fn authenticates(&self, headers: &HeaderMap) -> bool {
        headers
            .get(AUTHORIZATION)
            .and_then(|value| presented_token(value.as_bytes()))
            .is_some_and(|presented| self.matches(presented))
    }
}

impl FromStr for BearerToken {
    type Err = TokenError;

    fn from_str(token: &str) -> Result<Self, Self::Err> {
        Self::new(token)
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// The token of an `Authorization` header value, as kube-apiserver's bearer-token authenticator
/// takes it: `strings.SplitN(strings.TrimSpace(auth), " ", 3)`, a first part of `bearer` in any
/// case and a non-empty second part.
fn presented_token(header: &[u8]) -> Option<&[u8]> {
    let mut parts = header.trim_ascii().splitn(3, |byte| *byte == b' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case(b"bearer") && !token.is_empty()).then_some(token)
}

/// Compares with `subtle`: every byte is looked at whatever the contents, so the time taken
/// says nothing about how much of a guess was right (only whether its length was).
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    bool::from(expected.ct_eq(presented))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_only_when_every_byte_and_the_length_match() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"abc", b"abc\0"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"abc", b""));
    }

    #[test]
    fn the_header_is_read_as_kube_apiserver_reads_it() {
        assert_eq!(presented_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(presented_token(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(presented_token(b"  BEARER abc  "), Some(&b"abc"[..]));
        assert_eq!(presented_token(b"Bearer abc def"), Some(&b"abc"[..]));
        assert_eq!(presented_token(b"Bearer "), None);
        assert_eq!(presented_token(b"Bearer"), None);
        assert_eq!(presented_token(b"Basic abc"), None);
        assert_eq!(presented_token(b"abc"), None);
    }

    #[test]
    fn tokens_are_visible_ascii() {
        assert_eq!(BearerToken::new("").err(), Some(TokenError::Empty));
        assert_eq!(BearerToken::new("a b").err(), Some(TokenError::Invalid));
        assert_eq!(BearerToken::new("a\n").err(), Some(TokenError::Invalid));
        assert_eq!(BearerToken::new("jetón").err(), Some(TokenError::Invalid));
        assert!(BearerToken::new("abc.DEF-123_~").is_ok());
    }
}
