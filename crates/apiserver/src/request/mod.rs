//! The stages of kube-apiserver's request pipeline that every kind shares, one module each:
//! reading the body ([`body`]), the write options ([`options`]), decoding into the kind's type
//! with field validation ([`decode`]), and the `Warning` headers of the answer ([`warnings`]).

pub mod body;
pub mod decode;
pub mod encode;
pub mod negotiate;
pub mod options;
pub mod protobuf;
pub mod warnings;
