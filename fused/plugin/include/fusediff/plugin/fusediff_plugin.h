/* fusediff plugin ABI: a kernel under test, loaded in process from a shared library.
 *
 * EXPERIMENTAL (ABI major 0). What may still change before major 1: the feature names, the fields of the
 * declaration, the draw's operand layout for stages other than the activation, and the threading values. Within
 * major 0 every change follows the rules below, so a plugin built against minor N keeps working with a host that
 * offers minor N; a major change is announced in docs/plugins.md.
 *
 * The contract (docs/plugins.md says it at length):
 *  - One exported symbol, FUSEDIFF_PLUGIN_ENTRY ("fusediff_plugin_entry"), of type fusediff_plugin_entry_fn. The host
 *    passes what it offers (a major version and a range of minors); the plugin returns its API table for one minor
 *    in that range, or NULL when it can speak none of them. The host accepts any minor in its range.
 *  - Every struct starts with its size in bytes (struct_size). New fields are only ever appended, so a reader takes
 *    a field only when struct_size covers it (FUSEDIFF_HAS_FIELD). Arrays of structs are strided by the first
 *    element's struct_size (FUSEDIFF_AT). A struct embedded by value in another (fusediff_boundary,
 *    fusediff_message) never grows: where it needs more, the outer struct appends a field.
 *  - Enum values are fixed here forever; fusediff checks them at compile time against its own enums.
 *  - Features and stage kinds are named by strings. The host gives a case to a plugin only when the plugin claims
 *    every feature the case uses; any other case is counted unsupported with that reason, never misread.
 *  - The host owns every buffer: the case, the draws, the outputs (poisoned before each call) and the message
 *    buffers. No allocator and no exception crosses the boundary: the plugin copies what it keeps, writes only into
 *    the buffers it is given, and returns status codes.
 *  - Strings the plugin hands the host (name, version, features, implementation names) stay valid until the
 *    library is unloaded (string literals are the simplest).
 *
 * Plain C99; also compiles as C++17. No fusediff header is needed to write a plugin.
 */
#ifndef FUSEDIFF_PLUGIN_H_
#define FUSEDIFF_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FUSEDIFF_PLUGIN_ABI_MAJOR 0
#define FUSEDIFF_PLUGIN_ABI_MINOR 0
#define FUSEDIFF_PLUGIN_ENTRY "fusediff_plugin_entry"

#if defined(_WIN32)
#define FUSEDIFF_PLUGIN_EXPORT __declspec(dllexport)
#else
#define FUSEDIFF_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Whether *ptr, a `type` whose writer says it is struct_size bytes long, holds `field` (its writer's minor had it). */
#define FUSEDIFF_HAS_FIELD(type, ptr, field) ((ptr)->struct_size >= offsetof(type, field) + sizeof((ptr)->field))
/* Element i of an array of structs whose elements are each first->struct_size bytes long. */
#define FUSEDIFF_AT(type, first, i) ((const type*)((const char*)(first) + (size_t)(i) * (first)->struct_size))

/* ---- Fixed enum values (compared with fusediff's own at compile time) ---------------------------------------- */

/* A declaration field that follows the case's graph instead of naming one value. */
#define FUSEDIFF_GRAPH (-1)
/* No table handed over (fusediff_case.table_kind). */
#define FUSEDIFF_TABLE_NONE (-1)

enum fusediff_scalar_type { FUSEDIFF_INT8 = 0, FUSEDIFF_UINT8 = 1, FUSEDIFF_INT16 = 2 };
/* half_away_from_zero: C round, TFLite; half_to_even: IEEE, ONNX; half_up: floor(x + 1/2). */
enum fusediff_rounding { FUSEDIFF_HALF_AWAY_FROM_ZERO = 0, FUSEDIFF_HALF_TO_EVEN = 1, FUSEDIFF_HALF_UP = 2 };
/* Whether the output zero point is added after the rounding (TFLite) or before it. */
enum fusediff_zero_point_order { FUSEDIFF_ZP_AFTER_ROUNDING = 0, FUSEDIFF_ZP_BEFORE_ROUNDING = 1 };
/* How the accumulator becomes the intermediate code (docs/conventions.md). double_rounding is TFLite's
 * MultiplyByQuantizedMultiplier; single_rounding its TFLITE_SINGLE_ROUNDING build; f32_* ONNX Runtime's / oneDNN's. */
enum fusediff_requant {
  FUSEDIFF_REQUANT_EXACT = 0,
  FUSEDIFF_REQUANT_DOUBLE_ROUNDING = 1,
  FUSEDIFF_REQUANT_SINGLE_ROUNDING = 2,
  FUSEDIFF_REQUANT_F32_HALF_EVEN = 3,
  FUSEDIFF_REQUANT_F32_ZERO_POINT_FIRST = 4
};
/* Whether the intermediate is rounded to a code (quantized) or kept as a binary32 value (f32). */
enum fusediff_intermediate_kind { FUSEDIFF_INTERMEDIATE_QUANTIZED = 0, FUSEDIFF_INTERMEDIATE_F32 = 1 };
/* How the activation's output becomes the value the output rounding rounds (exact: the real value, once). */
enum fusediff_post_ops { FUSEDIFF_POST_OPS_EXACT = 0, FUSEDIFF_POST_OPS_BINARY32 = 1, FUSEDIFF_POST_OPS_BINARY32_LIBM = 2 };
enum fusediff_activation {
  FUSEDIFF_ACT_RELU = 0,
  FUSEDIFF_ACT_RELU6 = 1,
  FUSEDIFF_ACT_LEAKY_RELU = 2,
  FUSEDIFF_ACT_HARD_SIGMOID = 3,
  FUSEDIFF_ACT_HARD_SWISH = 4,
  FUSEDIFF_ACT_GELU_ERF = 5,
  FUSEDIFF_ACT_GELU_TANH = 6,
  FUSEDIFF_ACT_SIGMOID = 7,
  FUSEDIFF_ACT_TANH = 8,
  FUSEDIFF_ACT_SILU = 9,
  FUSEDIFF_ACT_ELU = 10,
  FUSEDIFF_ACT_SOFTPLUS = 11,
  FUSEDIFF_ACT_MISH = 12
};
/* lut: one output code per intermediate code; lut_interp: TFLite's 513 int16 knots; pwl: fixed-point segments. */
enum fusediff_table_kind { FUSEDIFF_TABLE_LUT = 0, FUSEDIFF_TABLE_LUT_INTERP = 1, FUSEDIFF_TABLE_PWL = 2 };
enum fusediff_producer { FUSEDIFF_PRODUCER_CONV2D = 0, FUSEDIFF_PRODUCER_FULLY_CONNECTED = 1 };
enum fusediff_conv_op { FUSEDIFF_OP_CONV2D = 0, FUSEDIFF_OP_CONV_TRANSPOSE2D = 1 };
/* int8 weights in [-127, 127] (symmetric, TFLite) or [-128, 127] (full). */
enum fusediff_weight_range { FUSEDIFF_WEIGHTS_SYMMETRIC = 0, FUSEDIFF_WEIGHTS_FULL = 1 };
/* serial: one instance, one call at a time; instance_per_thread: one instance per host thread, instances run
 * concurrently; shared: one instance, run() may be called from several threads at once. */
enum fusediff_threading { FUSEDIFF_THREADING_SERIAL = 0, FUSEDIFF_THREADING_INSTANCE_PER_THREAD = 1, FUSEDIFF_THREADING_SHARED = 2 };
/* What a call returned. run() sets one status per draw. */
enum fusediff_status { FUSEDIFF_OK = 0, FUSEDIFF_REJECTED = 1, FUSEDIFF_ERROR = 2 };

/* ---- What the host offers --------------------------------------------------------------------------------- */

typedef struct fusediff_host {
  uint32_t struct_size;
  uint32_t abi_major;      /* FUSEDIFF_PLUGIN_ABI_MAJOR of the host */
  uint32_t abi_minor_min;  /* the oldest minor the host reads */
  uint32_t abi_minor_max;  /* the newest minor the host knows */
} fusediff_host;

/* A host-owned buffer for a message (a rejection's reason, an error): write at most capacity bytes, NUL included. */
typedef struct fusediff_message {
  uint32_t struct_size;
  uint32_t capacity;
  char* text;
} fusediff_message;

/* One key=value option of the path word ("plugin:PATH.so,key=value,..."), in the order written. */
typedef struct fusediff_option {
  uint32_t struct_size;
  const char* key;
  const char* value;
} fusediff_option;

/* ---- The case, given once --------------------------------------------------------------------------------- */

/* A quantization boundary: real = scale * (code - zero_point), codes in [qmin, qmax]. `rounding` is how values are
 * rounded into it; `zero_point_order` matters for the activation's output only. */
typedef struct fusediff_boundary {
  uint32_t struct_size;
  int32_t type;  /* fusediff_scalar_type */
  int32_t narrow; /* 1: the type's most negative code is dropped (int8 [-127, 127]) */
  int32_t qmin, qmax;
  float scale;
  int32_t zero_point;
  int32_t rounding;          /* fusediff_rounding */
  int32_t zero_point_order;  /* fusediff_zero_point_order */
} fusediff_boundary;

typedef struct fusediff_pwl_segment {
  uint32_t struct_size;
  /* y = sat(RoundingDivideByPOT64(slope * (u - u_lo), shift) + offset) over u in [u_lo, u_hi] */
  int32_t u_lo, u_hi, slope, offset, shift;
} fusediff_pwl_segment;

/* One stage after the producer, in pattern order. */
typedef struct fusediff_stage {
  uint32_t struct_size;
  const char* kind;      /* "act", "add", "maxpool", "avgpool", "fc", "batchnorm" (fusediff's stage kinds) */
  const char* rule;      /* the stage's arithmetic rule by fusediff's name ("tflite", ...), "" where it has none */
  fusediff_boundary out; /* its output boundary (the activation's: the case's output) */
  fusediff_boundary residual;  /* add: the residual's quantization */
  int32_t window_kernel, window_stride, window_padding;  /* pools */
  int32_t fc_outputs;    /* fc: output features */
} fusediff_stage;

typedef struct fusediff_case {
  uint32_t struct_size;
  const char* name;            /* the case's name in fusediff's results */
  int32_t producer;            /* fusediff_producer */
  /* The geometry limits every draw of the case keeps (what the plugin declared, or the host's defaults). */
  int32_t max_batch, max_spatial, max_channels, max_kernel, max_stride, max_dilation;
  int32_t transposed;          /* 1: draws may be ConvTranspose2D */
  int32_t weight_range;        /* fusediff_weight_range */
  /* The producer's requantization into the intermediate u. */
  int32_t requant;             /* fusediff_requant */
  int32_t intermediate_kind;   /* fusediff_intermediate_kind */
  fusediff_boundary intermediate;  /* u: type, scale, zero point, rounding */
  fusediff_boundary output;        /* y: the activation's output, with its rounding and zero-point order */
  int32_t post_ops;            /* fusediff_post_ops */
  int32_t activation;          /* fusediff_activation */
  float alpha;                 /* leaky_relu / elu, 0 otherwise */
  /* The activation's table as fusediff builds it for the activation's input boundary (TFLite's LUTPopulate for
   * lut and lut_interp), or an external table; table_kind FUSEDIFF_TABLE_NONE where there is none. */
  int32_t table_kind;
  const int32_t* table_lut;    /* lut: table_lut[u - intermediate.qmin] = output code */
  uint32_t table_lut_count;
  const int32_t* table_knots;  /* lut_interp: 513 knots */
  uint32_t table_knot_count;
  const fusediff_pwl_segment* table_segments;  /* pwl (stride: FUSEDIFF_AT) */
  uint32_t table_segment_count;
  const fusediff_stage* stages;  /* in order (stride: FUSEDIFF_AT) */
  uint32_t stage_count;
  const char* const* features;   /* every feature the case uses */
  uint32_t feature_count;
} fusediff_case;

/* ---- A batch of draws ------------------------------------------------------------------------------------- */

/* One stage's tensors beside the one it reads (empty where its kind takes none): add: codes (the residual, one per
 * element of the producer's output, NHWC); fc: weight_scales, weights [fc_outputs][K], bias; batchnorm: per channel. */
typedef struct fusediff_operands {
  uint32_t struct_size;
  const int32_t* codes;
  uint64_t code_count;
  const float* weight_scales;
  uint32_t weight_scale_count;
  const int8_t* weights;
  uint64_t weight_count;
  const int32_t* bias;
  uint32_t bias_count;
  const float *bn_gamma, *bn_beta, *bn_mean, *bn_var;
  uint32_t bn_count;
} fusediff_operands;

/* One draw: the producer's shape and tensors (input NHWC int codes, weights OHWI int8, bias int32 at scale
 * sx * sw[k]), each stage's operands, and the host-owned output y (y_count codes of the final tensor, NHWC,
 * poisoned). The plugin writes y, status, and for a rejection the reason into `message`. */
typedef struct fusediff_draw {
  uint32_t struct_size;
  int32_t op;  /* fusediff_conv_op */
  int32_t batch, input_height, input_width, input_channels, output_channels;
  int32_t kernel_height, kernel_width, stride_height, stride_width, dilation_height, dilation_width;
  int32_t padding_top, padding_left, padding_bottom, padding_right;
  int32_t output_padding_height, output_padding_width;
  int32_t output_height, output_width;  /* the producer's output */
  fusediff_boundary input;   /* sx, zx */
  const int32_t* input_codes;
  uint64_t input_count;
  const float* weight_scales;  /* sw[k], output_channels values */
  const int8_t* weights;
  uint64_t weight_count;
  const int32_t* bias;
  const fusediff_operands* operands;  /* operands[i] for stage i; fewer than stage_count where the rest take none
                                        (stride: FUSEDIFF_AT) */
  uint32_t operand_count;
  int32_t* y;
  uint64_t y_count;
  /* Written by the plugin. */
  int32_t status;              /* fusediff_status: ok or rejected */
  fusediff_message message;    /* a rejection's reason */
  const char* implementation;  /* what ran the draw (a kernel's name), or NULL */
} fusediff_draw;

typedef struct fusediff_batch {
  uint32_t struct_size;
  fusediff_draw* draws;  /* stride: draws[0].struct_size */
  uint32_t draw_count;
} fusediff_batch;

/* ---- What the plugin declares ----------------------------------------------------------------------------- */

/* The arithmetic the plugin claims to implement: FUSEDIFF_GRAPH where it follows the case's graph. fusediff builds
 * the declared convention from it; a declaration that equals the graph's convention is judged at the case's
 * tolerance, any other is a labelled cross-convention measurement. The draw limits are properties every draw must
 * have. The host sets struct_size, requant, intermediate_kind and post_ops to FUSEDIFF_GRAPH and every other field
 * to 0; the plugin writes the fields its minor has. */
typedef struct fusediff_declaration {
  uint32_t struct_size;
  int32_t requant;            /* fusediff_requant or FUSEDIFF_GRAPH */
  int32_t intermediate_kind;  /* fusediff_intermediate_kind or FUSEDIFF_GRAPH */
  int32_t post_ops;           /* fusediff_post_ops or FUSEDIFF_GRAPH */
  int32_t weight_range;       /* fusediff_weight_range */
  int32_t threading;          /* fusediff_threading */
  uint32_t preferred_batch;   /* draws per run() call the plugin wants (0: the host's default) */
  /* Draw limits: 0 keeps the host's default for that limit. */
  int32_t max_batch, max_spatial, max_channels, max_kernel, max_stride, max_dilation;
  int32_t transposed;         /* 1: the plugin computes ConvTranspose2D draws too */
} fusediff_declaration;

/* The API table the entry point returns (static storage in the plugin). */
typedef struct fusediff_plugin_api {
  uint32_t struct_size;
  uint32_t abi_major, abi_minor;  /* what the plugin speaks: the host's major, a minor in the offered range */
  const char* name;
  const char* version;
  const char* const* features;    /* the features it claims ("producer:conv2d", "stage:act", "table:lut", ...) */
  uint32_t feature_count;
  /* A new instance for these options (`message` for an error), or NULL. */
  void* (*create)(const fusediff_option* options, uint32_t option_count, fusediff_message* message);
  void (*destroy)(void* instance);
  /* The instance's declaration (the same for every case). */
  int32_t (*declare)(void* instance, fusediff_declaration* declaration);
  /* The case, given once before its draws: FUSEDIFF_OK, or FUSEDIFF_REJECTED with the reason in `message`. */
  int32_t (*prepare)(void* instance, const fusediff_case* c, fusediff_message* message);
  /* A batch of draws of the prepared case: each draw's status and output. FUSEDIFF_ERROR fails the run. */
  int32_t (*run)(void* instance, fusediff_batch* batch);
} fusediff_plugin_api;

typedef const fusediff_plugin_api* (*fusediff_plugin_entry_fn)(const fusediff_host* host);

/* Whether the host offers `minor` of this header's major: what an entry point checks before returning its table. */
static inline int fusediff_host_offers(const fusediff_host* host, uint32_t minor) {
  return host->abi_major == FUSEDIFF_PLUGIN_ABI_MAJOR && host->abi_minor_min <= minor && minor <= host->abi_minor_max;
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FUSEDIFF_PLUGIN_H_ */
