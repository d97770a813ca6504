"""Helpers shared by the tools/reference scripts.

- Fixture files: repository paths, the JSON layout of the template goldens (dump_json) and the
  regenerate-or---check command line of render_templates.py / render_mm_templates.py
  (regenerate_or_check).
- Vision tower goldens (make_vl_vision_goldens.py, make_cuda_vision_goldens.py,
  make_qwen3vl_vision_goldens.py): the larger-than-default weight init of the tiny Qwen2.5-VL tower,
  the tower's weights saved under transformers 5 names, the per-case random pixel values and the
  per-stage activations captured with forward hooks.

Every helper draws random numbers in the same order as the scripts did before they shared it, so the
fixtures regenerate unchanged. torch is imported only by the vision helpers.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES_DIR = os.path.join(ROOT, "tests", "fixtures")
TEMPLATES_DIR = os.path.join(FIXTURES_DIR, "templates")


# ---- fixture files ----


def dump_json(obj):
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def regenerate_or_check(doc, out_dir, make_files):
    """The command line of a JSON-fixture script (its usage in `doc`): writes make_files() ({name: text})
    under out_dir, or with --check compares them with the committed files. Returns the exit status:
    1 when --check finds a stale file."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed fixtures instead of writing")
    check = ap.parse_args().check
    files = make_files()
    os.makedirs(out_dir, exist_ok=True)
    stale = []
    for name, text in files.items():
        path = os.path.join(out_dir, name)
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    stale.append(name)
        else:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            print(f"wrote {path} ({len(text.encode())} bytes)")
    if stale:
        print("stale fixtures:", ", ".join(stale))
        return 1
    return 0


# ---- vision towers ----


def vision_output_dir(fixture):
    """The --out argument (default tests/fixtures/<fixture>), created; seeds torch's global RNG with 0
    (the weight init draws from it)."""
    import argparse

    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(FIXTURES_DIR, fixture))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    return out


def eager_f32(model_class, cfg):
    """model_class(cfg.vision_config) in eval mode, f32, with transformers' eager attention."""
    cfg.vision_config._attn_implementation = "eager"
    return model_class(cfg.vision_config).eval().float()


def init_qwen25_vision_weights(model, bf16_exact=False):
    """Re-initialises a Qwen2.5-VL vision tower larger than the default init (linears std 0.2, biases
    0.1, patch embed 0.05, norm weights 1 + 0.2 N(0,1)); bf16_exact rounds every weight to bf16."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_q" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "patch_embed" in name:
                p.copy_(0.05 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
            if bf16_exact:
                p.copy_(p.to(torch.bfloat16).float())


def save_vision_weights(model, out_dir, dtype=None):
    """The tower's state dict as out_dir/model.safetensors under "model.visual.*" (transformers 5)."""
    from safetensors.torch import save_file

    weights = {
        "model.visual." + k: (v if dtype is None else v.to(dtype)).contiguous() for k, v in model.state_dict().items()
    }
    save_file(weights, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})


def vision_cases(cases, vision_config):
    """Yields (case, grid_thw I64 [n, 3], patches, pixel_values F32 [patches, C*T*P*P]) for each case
    ({name: grids}), the pixel values N(0, 1) from one generator seeded 1."""
    import torch

    v = vision_config
    patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size
    g = torch.Generator().manual_seed(1)
    for case, grids in cases.items():
        grid_thw = torch.tensor(grids, dtype=torch.int64)
        patches = int(grid_thw.prod(-1).sum())
        yield case, grid_thw, patches, torch.randn(patches, patch_dim, generator=g)


def capture_vision_stages(model, pixel_values, grid_thw, embed=False):
    """Runs the tower and returns (captured, result): captured holds "patch_embed" (the Conv3d output),
    with embed "embed" (the input of block 0) and "blk.<i>.out" for every block."""
    import torch

    captured = {}
    hooks = [model.patch_embed.register_forward_hook(lambda m, i, o: captured.__setitem__("patch_embed", o.clone()))]
    if embed:
        hooks.append(
            model.blocks[0].register_forward_pre_hook(
                lambda m, args, kwargs: captured.__setitem__("embed", args[0].clone()), with_kwargs=True
            )
        )
    for bi, blk in enumerate(model.blocks):
        hooks.append(blk.register_forward_hook(lambda m, i, o, bi=bi: captured.__setitem__(f"blk.{bi}.out", o.clone())))
    with torch.no_grad():
        res = model(pixel_values, grid_thw=grid_thw)
    for h in hooks:
        h.remove()
    return captured, res


def save_goldens(tensors, out_dir, cases, **metadata):
    """tensors ({name: tensor}) as out_dir/goldens.safetensors; metadata "cases" is the JSON list of the
    case names, each further keyword a JSON value."""
    from safetensors.torch import save_file

    meta = {"cases": json.dumps(list(cases))}
    meta.update({k: json.dumps(v) for k, v in metadata.items()})
    save_file({k: t.contiguous() for k, t in tensors.items()}, os.path.join(out_dir, "goldens.safetensors"), metadata=meta)
