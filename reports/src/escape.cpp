// XML and HTML escaping: their own object, so that what links only them (the launcher's bisect reports) does not
// pull the reports that hash sample sets (OpenSSL).
#include <string>
#include <string_view>

#include "fusediff/reports/reports.h"

namespace fusediff::reports {

namespace {
// The five markup characters as entities; XML also escapes newline and tab and replaces the other control
// characters (not allowed in XML 1.0), HTML keeps them.
std::string Escape(std::string_view s, bool xml) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += xml ? "&apos;" : "&#39;"; break;
      default:
        if (xml && ch == '\n') out += "&#10;";
        else if (xml && ch == '\t') out += "&#9;";
        else if (xml && static_cast<unsigned char>(ch) < 0x20) out += '?';
        else out += ch;
    }
  }
  return out;
}
}  // namespace

std::string XmlEscape(std::string_view s) { return Escape(s, true); }
std::string HtmlEscape(std::string_view s) { return Escape(s, false); }

}  // namespace fusediff::reports
