/* Prints the configuration table as Markdown, for test_readme_config.sh. */
#include <dreamddp.h>

int main(void)
{
    return dd_config_print(stdout, DD_CONFIG_PRINT_MARKDOWN) == DD_OK ? 0 : 1;
}
