"""Framework plug-ins built on flashport's ops, one module per framework, imported on demand so that
`import flashport` needs only torch:

    flashport.integrations.transformers   register(): attn_implementation="flashport" (attention + mask function)
    flashport.integrations.diffusers      FlashportAttnProcessor (AttnProcessor2_0's contract)

See docs/torch.md."""
