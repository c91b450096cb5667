//! `#[tool]`: turns a documented `async fn` into an `agentloop::tool::Tool`.
//!
//! ```ignore
//! /// Adds two integers.
//! #[tool]
//! async fn add(a: i64, b: i64) -> Result<i64, String> { Ok(a + b) }
//! // generates `struct Add;` (the tool), `struct AddArgs { a, b }` (its arguments) and
//! // `impl Tool for Add`, keeping `add` callable as before.
//! ```
//!
//! - The doc comment is the description (or `#[tool(description = "…")]`).
//! - The name is the function's (or `#[tool(name = "…")]`).
//! - `#[tool(safe_to_retry)]` declares it idempotent: a call a crash left in flight runs
//!   again when the run is taken over (`Tool::safe_to_retry`).
//! - Parameters become the argument struct; their attributes (`#[serde(default)]`,
//!   `#[schemars(description = "…")]`, …) move to its fields. A parameter of type
//!   `ToolContext` receives the call's context instead.
//! - `Result<T, E>` returns `E` as an error result the model sees; any other return type
//!   always succeeds.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{
    parse_macro_input, Attribute, Expr, FnArg, GenericArgument, ItemFn, Lit, LitStr, Pat,
    PathArguments, ReturnType, Type,
};

/// Turns a documented `async fn` into a tool. See the crate docs.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut options = Options::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            options.name = Some(meta.value()?.parse::<LitStr>()?);
            Ok(())
        } else if meta.path.is_ident("description") {
            options.description = Some(meta.value()?.parse::<LitStr>()?);
            Ok(())
        } else if meta.path.is_ident("safe_to_retry") {
            options.safe_to_retry = true;
            Ok(())
        } else {
            Err(meta.error("expected `name = \"…\"`, `description = \"…\"` or `safe_to_retry`"))
        }
    });
    parse_macro_input!(attr with parser);
    let function = parse_macro_input!(item as ItemFn);
    expand(options, function).unwrap_or_else(syn::Error::into_compile_error).into()
}

#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    safe_to_retry: bool,
}

fn doc_text(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let Expr::Lit(expr) = &nv.value {
                if let Lit::Str(text) = &expr.lit {
                    let line = text.value();
                    lines.push(line.strip_prefix(' ').unwrap_or(&line).trim_end().to_owned());
                }
            }
        }
    }
    lines.join("\n").trim().to_owned()
}

fn pascal_case(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
        })
        .collect()
}

fn is_tool_context(ty: &Type) -> bool {
    let ty = match ty {
        Type::Reference(reference) => &*reference.elem,
        other => other,
    };
    matches!(ty, Type::Path(path) if path.path.segments.last().is_some_and(|s| s.ident == "ToolContext"))
}

/// `(Output, Error, returns_result)` for the function's return type.
fn output_types(ret: &ReturnType) -> syn::Result<(Type, Type, bool)> {
    let infallible: Type = syn::parse_quote!(::std::convert::Infallible);
    let ty = match ret {
        ReturnType::Default => return Ok((syn::parse_quote!(()), infallible, false)),
        ReturnType::Type(_, ty) => ty,
    };
    if let Type::Path(path) = &**ty {
        if let Some(last) = path.path.segments.last() {
            if last.ident == "Result" {
                let PathArguments::AngleBracketed(args) = &last.arguments else {
                    return Err(syn::Error::new(last.span(), "expected Result<T, E>"));
                };
                let types: Vec<&Type> = args
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                return match types.as_slice() {
                    [ok, err] => Ok(((*ok).clone(), (*err).clone(), true)),
                    _ => Err(syn::Error::new(
                        last.span(),
                        "#[tool] needs both Result types spelled out: Result<T, E>",
                    )),
                };
            }
        }
    }
    Ok(((**ty).clone(), infallible, false))
}

fn expand(options: Options, mut function: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &function.sig;
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(sig.generics.span(), "#[tool] functions cannot be generic"));
    }
    let fn_name = sig.ident.clone();
    let vis = function.vis.clone();
    let safe_to_retry = options.safe_to_retry;
    let tool_name = options.name.map_or_else(|| fn_name.to_string(), |n| n.value());
    let description = match options.description {
        Some(text) => text.value(),
        None => doc_text(&function.attrs),
    };
    if description.is_empty() {
        return Err(syn::Error::new(
            sig.ident.span(),
            "#[tool] needs a description: add a doc comment or #[tool(description = \"…\")]",
        ));
    }
    let struct_name = format_ident!("{}", pascal_case(&fn_name.to_string()), span = fn_name.span());
    let args_name = format_ident!("{}Args", struct_name);
    let (output, error, returns_result) = output_types(&sig.output)?;

    let mut fields = Vec::new();
    let mut call_args = Vec::new();
    for input in function.sig.inputs.iter_mut() {
        let FnArg::Typed(arg) = input else {
            return Err(syn::Error::new(input.span(), "#[tool] functions cannot take self"));
        };
        let Pat::Ident(pat) = &*arg.pat else {
            return Err(syn::Error::new(arg.pat.span(), "#[tool] parameters must be plain names"));
        };
        let ident = pat.ident.clone();
        let ty = (*arg.ty).clone();
        let attrs = std::mem::take(&mut arg.attrs);
        if is_tool_context(&ty) {
            if matches!(ty, Type::Reference(_)) {
                call_args.push(quote!(&ctx));
            } else {
                call_args.push(quote!(ctx.clone()));
            }
            continue;
        }
        fields.push(quote!(#(#attrs)* #vis #ident: #ty));
        call_args.push(quote!(args.#ident));
    }
    let awaited = if function.sig.asyncness.is_some() { quote!(.await) } else { quote!() };
    let body = if returns_result {
        quote!(#fn_name(#(#call_args),*)#awaited)
    } else {
        quote!(::std::result::Result::Ok(#fn_name(#(#call_args),*)#awaited))
    };
    let struct_doc = format!("The `{tool_name}` tool: {description}");
    let args_doc = format!("Arguments of the `{tool_name}` tool.");
    let ctx_ident = syn::Ident::new("ctx", Span::call_site());
    Ok(quote! {
        #function

        #[doc = #struct_doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #struct_name;

        #[doc = #args_doc]
        #[derive(Debug, ::agentloop::__private::serde::Deserialize, ::agentloop::__private::schemars::JsonSchema)]
        #[serde(crate = "::agentloop::__private::serde")]
        #[schemars(crate = "::agentloop::__private::schemars")]
        #[allow(missing_docs)]
        #vis struct #args_name {
            #(#fields,)*
        }

        impl ::agentloop::tool::Tool for #struct_name {
            const NAME: &'static str = #tool_name;
            type Args = #args_name;
            type Output = #output;
            type Error = #error;

            fn description(&self) -> ::std::string::String {
                ::std::string::String::from(#description)
            }

            fn safe_to_retry(&self) -> bool {
                #safe_to_retry
            }

            #[allow(unused_variables)]
            async fn call(
                &self,
                args: #args_name,
                #ctx_ident: ::agentloop::tool::ToolContext,
            ) -> ::std::result::Result<#output, #error> {
                #body
            }
        }
    })
}
