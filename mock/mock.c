/* mock.c: placeholder until the mock module lands. */
typedef int mock_placeholder;
