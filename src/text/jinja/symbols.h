// Static scope analysis: fills every FrameInfo of a parsed template the way jinja2's compiler does
// (jinja2/idtracking.py + the frame handling in jinja2/compiler.py). Frames are created for the
// template root, each loop body / loop else / loop filter, macro and call-block bodies, filter blocks,
// set blocks and with blocks; if-branches share their enclosing frame.
//
// For each frame the analysis records which names it owns and how they are initialised on entry:
// a name first read in a frame (and unknown to enclosing frames) is resolved from the render context,
// a name first assigned is undefined (or aliased from an enclosing frame that owns it), loop targets and
// macro arguments are parameters. Names assigned in only some branches of an if fall back to their
// alias / context value, as in jinja2.
#pragma once

#include "text/jinja/ast.h"

namespace loom::text::jinja {

void analyze_symbols(TemplateNode& root);

}  // namespace loom::text::jinja
