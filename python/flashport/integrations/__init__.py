"""Framework plug-ins built on flashport's ops (one module per framework, imported on demand so that
`import flashport` needs only torch): transformers (an AttentionInterface entry and its mask function)
and diffusers (an attention processor) are planned here; see docs/torch.md."""
