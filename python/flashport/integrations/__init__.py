"""Framework plug-ins built on flashport's ops, one module per framework, imported on demand so that
`import flashport` needs only torch:

    flashport.integrations.transformers   register(): attn_implementation="flashport" ("fport" on transformers 5; it returns the name)
    flashport.integrations.diffusers      FlashportAttnProcessor (AttnProcessor2_0's contract)

See docs/torch.md."""
